"""Arrays of either framework: which path a call takes, and new outputs of the caller's kind.

numpy arrays (and any other DLPack or buffer-protocol array) go straight to the extension. torch
tensors go through ``torch.ops.turbodecode.*``, so that torch.compile, functionalization and
CUDA-graph capture see a registered operator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _turbodecode as _ext

try:
    import torch
except ImportError:  # torch is optional
    torch = None

_NUMPY_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "uint8": np.uint8,
    "int32": np.int32,
}


def shape(array: Any, name: str) -> tuple[int, ...]:
    """The shape of an array argument; TypeError naming the argument for anything else."""
    try:
        return tuple(array.shape)
    except AttributeError:
        raise TypeError(
            f"argument '{name}': expected an array (numpy, torch or DLPack), "
            f"got {type(array).__name__}"
        ) from None


def is_torch(array: Any) -> bool:
    """True when ``array`` is a torch tensor."""
    return torch is not None and isinstance(array, torch.Tensor)


def empty(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """An uninitialised array of ``shape`` on the framework and device of ``like``."""
    if is_torch(like):
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    return np.empty(shape, dtype=_NUMPY_DTYPES[dtype])


def zeros(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """A zero-filled array of ``shape`` on the framework and device of ``like``."""
    if is_torch(like):
        return torch.zeros(shape, dtype=getattr(torch, dtype), device=like.device)
    return np.zeros(shape, dtype=_NUMPY_DTYPES[dtype])


def call(name: str, like: Any, *args: Any) -> None:
    """Runs operator ``name`` with ``args`` (its schema order): through torch.ops when ``like``
    is a torch tensor, else directly through the extension."""
    if is_torch(like):
        getattr(torch.ops.turbodecode, name).default(*args)
    else:
        getattr(_ext, name)(*args)
