"""Fixtures shared by the Python tests: a fresh seed per test (printed, so a failure shows it;
TD_TEST_SEED=<seed> replays it) and the devices to run on."""

from __future__ import annotations

import os
import secrets

import numpy as np
import pytest

import turbodecode as td

try:
    import torch
except ImportError:
    torch = None

CUDA = td.cuda_available() and torch is not None and torch.cuda.is_available()


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("TD_TEST_SEED", secrets.randbits(63)))
    print(f"seed {seed} (TD_TEST_SEED={seed} replays it)")
    return np.random.default_rng(seed)


requires_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
requires_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device (or torch without CUDA)")

#: Devices the torch tests run on: the CPU, and CUDA where there is one.
TORCH_DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
