"""examples/python/gemma_decoder.py: the decoder loop matches SDPA on F16 K/V under
torch.compile(fullgraph=True)."""

from __future__ import annotations

import pathlib
import sys

import pytest
from conftest import requires_cuda, requires_torch, torch

pytestmark = requires_torch

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


@pytest.fixture
def example():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import gemma_decoder

        yield gemma_decoder
    finally:
        sys.path.remove(str(EXAMPLES))


def test_small_loop_traces_as_one_graph_on_the_cpu(example):
    """aot_eager: dynamo and functionalization of the whole step, no code generation (fast)."""
    with torch.no_grad():
        worst = example.decode(["--device", "cpu", "--steps", "12", "--window", "8",
                                "--hidden", "256", "--vocab", "512", "--batch", "2",
                                "--backend", "aot_eager"])
    assert worst >= example.MIN_COSINE


@requires_cuda
@pytest.mark.parametrize("v_format", ["tq8", "f16"])
def test_loop_on_cuda(example, v_format):
    with torch.no_grad():
        worst = example.decode(["--device", "cuda", "--steps", "48", "--v-format", v_format])
    assert worst >= example.MIN_COSINE
