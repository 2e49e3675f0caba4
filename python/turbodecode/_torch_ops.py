"""The operators as ``torch.ops.turbodecode.<name>``, and their fake implementations.

The operator library ``libturbodecode_torch.so`` beside this file (built when the build's Python
has torch, against that torch) defines every operator and implements it in C++: the dispatcher
calls the library directly. Without it, or with ``TURBODECODE_TORCH_OPS=python``, the operators
are defined here from the same schemas (the extension's OPERATOR_SCHEMAS) and implemented by
the extension function of the same name, a Python kernel that costs a few microseconds more
per op.

Each operator runs on torch's current CUDA stream, returns nothing and writes the arguments its
schema marks ``(x!)``; its fake implementation writes nothing, so torch.compile traces every
op without a graph break and functionalizes the writes. Configurations travel as keys
(``str plan``, ``str cache``, ``str params``): the ``key`` attribute of DecodePlan,
KvCacheConfig, HcParams and HcPrePlan.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from . import _turbodecode as _ext

OPERATOR_LIBRARY = Path(__file__).with_name("libturbodecode_torch.so")


def _writes_nothing(*args: object) -> None:
    """Fake implementation: every operator only writes arguments it is given."""
    return None


def _load_operator_library() -> bool:
    """Loads the C++ operators; False where the library is absent, disabled or unloadable."""
    if os.environ.get("TURBODECODE_TORCH_OPS") == "python" or not OPERATOR_LIBRARY.exists():
        return False
    try:
        torch.ops.load_library(str(OPERATOR_LIBRARY))
    except OSError as error:  # built against another torch than the one imported
        warnings.warn(f"turbodecode: {OPERATOR_LIBRARY.name} does not load ({error}); "
                      "the operators run through Python kernels", stacklevel=2)
        return False
    return True


def register(native: bool) -> torch.library.Library:
    """Defines the operators (unless the C++ library did) and registers the fake
    implementations; the returned library must stay referenced."""
    library = torch.library.Library("turbodecode", "FRAGMENT" if native else "DEF")
    for name, schema in _ext.OPERATOR_SCHEMAS.items():
        if not native:
            library.define(name + schema)
            kernel = getattr(_ext, name)
            library.impl(name, kernel, "CPU")
            library.impl(name, kernel, "CUDA")
        torch.library.register_fake(f"turbodecode::{name}", _writes_nothing, lib=library)
    return library


#: True when the operators are the C++ library's (libturbodecode_torch.so).
NATIVE = _load_operator_library()
LIBRARY = register(NATIVE)
