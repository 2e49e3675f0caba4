"""The KV cache of one layer (kv_cache.h; SPEC §1.3, §1.7) and the quantize-on-write append."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _arrays
from . import _turbodecode as _ext
from ._enums import as_member, name_of
from .codec import RowFormat, row_bytes, row_scales

#: Page sizes a paged cache accepts (rows per page).
PAGE_SIZES = tuple(_ext.PAGE_SIZES)


class LayerKind(str, enum.Enum):
    """linear: position p lives in logical row p (p >= capacity is an error).
    ring: position p lives in logical row p mod capacity (sliding-window layers)."""

    linear = "linear"
    ring = "ring"




@dataclass(frozen=True)
class KvCacheConfig:
    """One layer's cache: ``slots`` sequences × ``n_kv_heads`` × ``capacity`` positions.

    Validated on construction (turbodecode.InvalidArgument names the first field that breaks a
    rule). ``page_size`` > 0 makes a paged cache of ``pages`` physical pages (SPEC §1.7).
    """

    slots: int = 1
    n_kv_heads: int = 1
    capacity: int = 0  #: logical rows per slot
    head_dim: int = 256  #: 256 or 512
    kind: LayerKind | str = LayerKind.linear
    k_format: RowFormat | str = RowFormat.f16
    v_format: RowFormat | str = RowFormat.tq8
    scale_factor_d512: float = 1.0
    device: str = "cpu"  #: "cpu" or "cuda"
    page_size: int = 0  #: 0: contiguous; else one of PAGE_SIZES
    pages: int = 0
    #: The configuration as one string: what torch.ops.turbodecode.append_kv takes as ``cache``.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", as_member(LayerKind, self.kind))
        object.__setattr__(self, "k_format", as_member(RowFormat, self.k_format))
        object.__setattr__(self, "v_format", as_member(RowFormat, self.v_format))
        key = _ext.cache_key(
            self.slots, self.n_kv_heads, self.capacity, self.head_dim, name_of(self.kind),
            name_of(self.k_format), name_of(self.v_format), self.scale_factor_d512,
            self.device, self.page_size, self.pages,
        )
        object.__setattr__(self, "key", key)

    @property
    def paged(self) -> bool:
        return self.page_size > 0


def bytes_per_position(config: KvCacheConfig) -> int:
    """Bytes one position of one KV head occupies (K + V + norms or scales)."""
    return _ext.bytes_per_position(config.key)


def pages_per_slot(config: KvCacheConfig) -> int:
    """Entries of a block table row: ceil(capacity / page_size), 0 for a contiguous cache."""
    return _ext.pages_per_slot(config.key)


def _storage_shapes(config: KvCacheConfig, format: str) -> tuple[tuple, str, tuple | None]:
    """(rows shape, rows dtype, norms shape or None) of one side of the cache."""
    outer = (
        (config.pages, config.n_kv_heads, config.page_size)
        if config.paged
        else (config.slots, config.n_kv_heads, config.capacity)
    )
    scales = row_scales(format, config.head_dim)
    if format == RowFormat.f16.value:
        return outer + (config.head_dim,), "float16", None
    return outer + (row_bytes(format, config.head_dim),), "uint8", outer + (scales,)


def _host_zeros(shape: tuple, dtype: str) -> np.ndarray:
    """Zeroed host memory from the library's allocator (aligned; huge pages when large)."""
    itemsize = np.dtype(dtype).itemsize
    return _ext.host_zeros(int(np.prod(shape)) * itemsize).view(dtype).reshape(shape)


class KvCache:
    """A layer's cache storage: numpy arrays or torch tensors, zero-filled on creation.

    Attributes ``k`` and ``v`` hold the rows ([slots, n_kv_heads, capacity, row], or
    [pages, n_kv_heads, page_size, row] when paged; float16 [.., D] for f16 rows, else uint8
    [.., row_bytes]); ``k_norms`` and ``v_norms`` the f32 side values [.., row_scales] (None for
    f16 rows); ``block_table`` the int32 [slots, pages_per_slot] table of a paged cache's view.

    ``backend`` is "numpy" or "torch"; by default torch for a CUDA cache, numpy for a CPU one.
    ``device`` (torch only) places the storage on one CUDA device, e.g. "cuda:1".
    """

    def __init__(self, config: KvCacheConfig, *, backend: str | None = None,
                 device: Any = None) -> None:
        if backend is None:
            backend = "torch" if config.device == "cuda" else "numpy"
        if backend not in ("numpy", "torch"):
            raise ValueError(f"backend must be 'numpy' or 'torch', not {backend!r}")
        if backend == "numpy" and config.device != "cpu":
            raise ValueError("backend 'numpy' holds CPU caches only; use backend='torch'")
        if backend == "torch" and _arrays.torch is None:
            raise ImportError("backend 'torch' needs torch installed")
        self.config = config
        self.block_table: Any = None
        self.k, self.k_norms = self._allocate(name_of(config.k_format), backend, device)
        self.v, self.v_norms = self._allocate(name_of(config.v_format), backend, device)

    def _allocate(self, format: str, backend: str, device: Any) -> tuple[Any, Any]:
        rows_shape, rows_dtype, norms_shape = _storage_shapes(self.config, format)
        if backend == "torch" and self.config.device == "cuda":
            torch = _arrays.torch
            place = torch.device(device if device is not None else "cuda")
            rows = torch.zeros(rows_shape, dtype=getattr(torch, rows_dtype), device=place)
            norms = (
                None if norms_shape is None
                else torch.zeros(norms_shape, dtype=torch.float32, device=place)
            )
            # The storage never moves: compiled CUDA graphs (torch.compile's reduce-overhead
            # mode) may then write it in place instead of skipping the graph.
            for part in (rows, norms):
                if part is not None:
                    torch._dynamo.mark_static_address(part)
            return rows, norms
        rows = _host_zeros(rows_shape, rows_dtype)
        norms = None if norms_shape is None else _host_zeros(norms_shape, "float32")
        if backend == "torch":
            torch = _arrays.torch
            return torch.from_numpy(rows), None if norms is None else torch.from_numpy(norms)
        return rows, norms

    @classmethod
    def from_arrays(cls, config: KvCacheConfig, k: Any, k_norms: Any, v: Any, v_norms: Any,
                    block_table: Any = None) -> KvCache:
        """A cache over storage the caller owns (shapes as the attributes; checked on use)."""
        cache = cls.__new__(cls)
        cache.config = config
        cache.k, cache.k_norms, cache.v, cache.v_norms = k, k_norms, v, v_norms
        cache.block_table = block_table
        return cache

    def view(self, block_table: Any) -> KvCache:
        """The same storage paired with a block table (int32 [slots, pages_per_slot], on the
        cache's device): how a paged cache is used."""
        return KvCache.from_arrays(self.config, self.k, self.k_norms, self.v, self.v_norms,
                                   block_table)

    @property
    def bytes(self) -> int:
        """Bytes of storage (without the block table)."""
        parts = (self.k, self.k_norms, self.v, self.v_norms)
        return sum(int(p.nbytes) for p in parts if p is not None)


def append_kv(cache: KvCache, k: Any, v: Any, slot_ids: Any, positions: Any) -> None:
    """Quantize-on-write append of n tokens (SPEC §1.3): for each i, writes K and V of every KV
    head, in the cache's formats, at the row of ``positions[i]`` in slot ``slot_ids[i]`` (through
    the block table when paged). k, v: [n, n_kv_heads, D] float32/float16/bfloat16; slot_ids,
    positions: [n] int32; all on the cache's device. Touches only the named rows.

    Rejects unknown slots, positions a linear cache cannot hold and two tokens naming one row
    (reading the indices on the host, which synchronises a CUDA stream) — except while a CUDA
    graph is being captured: then the kernel skips bad tokens at replay (kv_cache.h).
    """
    _arrays.call(
        "append_kv", k, cache.config.key, cache.k, cache.k_norms, cache.v, cache.v_norms,
        cache.block_table, k, v, slot_ids, positions,
    )
