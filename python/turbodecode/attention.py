"""Decode attention over a KvCache (attention.h; SPEC §2): plan once, run every step."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from . import _arrays
from . import _turbodecode as _ext
from ._enums import as_member, name_of
from .kv_cache import KvCache, KvCacheConfig

#: Most query rows per slot in one call (DecodeOptions.query_tokens).
MAX_QUERY_TOKENS = _ext.MAX_QUERY_TOKENS


class MaskKind(str, enum.Enum):
    """Which cached positions a query sees (mask_kind.h)."""

    causal = "causal"  #: linear cache; the query at sp sees positions 0..sp
    sliding_ring = "sliding_ring"  #: ring cache; the last min(sp + 1, capacity), ≤ window
    sliding_linear = "sliding_linear"  #: linear cache; like causal, the last `window` only


@dataclass(frozen=True)
class DecodeOptions:
    """Options of a decode; the fields of the C++ DecodeOptions."""

    n_heads: int = 0  #: query heads; a multiple of the cache's n_kv_heads
    scale: float = 0.0  #: score scale; 0 means 1/sqrt(D) (Gemma passes 1.0)
    softcap: float = 0.0  #: 0 = off; else s = softcap·tanh(s/softcap)
    mask: MaskKind | str = MaskKind.causal
    sliding_window: int = 0  #: 0 = the whole ring or sequence
    #: With TQ V the attention sum lives in the rotated basis. False: the library returns
    #: o = R_D⁻¹(sum). True: it returns r = R_D(o) and the caller folds the inverse into its
    #: output projection, W_o·o = (W_o·R_D⁻¹)·r with R_D⁻¹(y) = s ⊙ (H_D·y/√D).
    rotated_output: bool = False
    #: Query rows per slot (speculative-decode verification, SPEC §2.8): the batch is runs of this
    #: many consecutive rows, each the tokens of one slot at consecutive positions.
    query_tokens: int = 1
    #: 0: chunk sizes from each row's own length (batch invariant); > 0, a multiple of 32: every
    #: row is cut into chunks of exactly this many positions (tests and benchmarks).
    fixed_chunk_positions: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mask", as_member(MaskKind, self.mask))


@dataclass(frozen=True)
class DecodePlan:
    """What plan_decode decided: the fields of the C++ DecodePlan (options.scale resolved)."""

    cache: KvCacheConfig
    options: DecodeOptions
    max_queries: int
    min_chunk_positions: int
    max_chunks: int
    spread_chunk_positions: int
    workspace_bytes: int  #: size of run_decode's workspace
    #: CUDA: blocks of the persistent decode launch (SMs × resident blocks of its kernel).
    device_blocks: int
    #: The plan as one string: what torch.ops.turbodecode.run_decode takes as ``plan``.
    key: str = field(repr=False, compare=False)

    def chunk_positions(self, visible: int) -> int:
        """Positions per chunk of a row that sees ``visible`` positions (batch invariant)."""
        return _ext.chunk_positions(self.key, visible)


def plan_decode(cache: KvCacheConfig, options: DecodeOptions, max_queries: int) -> DecodePlan:
    """Validates the cache configuration and options, picks the chunk policy for the cache's
    device and sizes the workspace for up to ``max_queries`` query rows per run."""
    fields = _ext.plan_decode(
        cache.key, options.n_heads, options.scale, options.softcap, name_of(options.mask),
        options.sliding_window, options.rotated_output, options.query_tokens,
        options.fixed_chunk_positions, max_queries,
    )
    return DecodePlan(
        cache=cache,
        options=dataclasses.replace(options, scale=fields["scale"]),
        max_queries=max_queries,
        min_chunk_positions=fields["min_chunk_positions"],
        max_chunks=fields["max_chunks"],
        spread_chunk_positions=fields["spread_chunk_positions"],
        workspace_bytes=fields["workspace_bytes"],
        device_blocks=fields["device_blocks"],
        key=fields["key"],
    )


def run_decode(plan: DecodePlan, cache: KvCache, q: Any, slot_ids: Any, seq_pos: Any,
               out: Any = None, lse: Any = None, workspace: Any = None) -> Any:
    """Decode attention; returns ``out``.

    q [n, n_heads, D] float32 (raw, unrotated); slot_ids, seq_pos [n] int32 (each token already
    appended; n a multiple of query_tokens, at most plan.max_queries); out [n, n_heads, D]
    float32; lse (optional) [n, n_heads] float32: the natural log of Σ exp(score) over the
    row's visible positions, −inf for a row that sees nothing; workspace uint8
    [>= plan.workspace_bytes], zero-filled before its first run (the CUDA backend keeps
    completion counters there, which every run leaves at zero again: reuse it). Everything on the cache's device. Outputs not given are
    allocated like ``q`` (lse only when given). Index values are checked on the host before
    launch, except while a CUDA graph is being captured (attention.h).
    """
    if cache.config.key != plan.cache.key:
        raise ValueError("cache: its config differs from the one plan_decode planned for")
    if out is None:
        rows = _arrays.shape(q, "q")[0]
        out = _arrays.empty(q, (rows, plan.options.n_heads, plan.cache.head_dim), "float32")
    if workspace is None:
        workspace = _arrays.zeros(q, (plan.workspace_bytes,), "uint8")
    _arrays.call(
        "run_decode", q, plan.key, cache.k, cache.k_norms, cache.v, cache.v_norms,
        cache.block_table, q, slot_ids, seq_pos, out, lse, workspace,
    )
    return out
