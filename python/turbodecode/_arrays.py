"""Arrays of either framework: which path a call takes, and new outputs of the caller's kind.

numpy arrays (and any other DLPack or buffer-protocol array) go straight to the extension. torch
tensors go through ``torch.ops.turbodecode.*`` whenever torch may need to see the operator: while
torch.compile traces, for tensor subclasses (FakeTensor, ...) and under torch function or
dispatch modes. A plain eager call on plain tensors goes straight to the extension too: the
dispatcher's round trip would add microseconds and nothing else (the extension reads torch's
current stream itself, so CUDA-graph capture works either way).
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


def _needs_dispatcher(tensor: Any) -> bool:
    return (
        torch.compiler.is_compiling()
        or type(tensor) is not torch.Tensor
        or torch._C._is_torch_function_mode_enabled()
        or torch._C._len_torch_dispatch_stack() > 0
    )


def call(name: str, like: Any, *args: Any) -> None:
    """Runs operator ``name`` with ``args`` (its schema order): through torch.ops when ``like``
    is a torch tensor that torch may need to see, else directly through the extension."""
    if is_torch(like) and _needs_dispatcher(like):
        getattr(torch.ops.turbodecode, name).default(*args)
    else:
        getattr(_ext, name)(*args)
