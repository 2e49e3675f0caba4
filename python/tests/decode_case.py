"""A decode problem for the tests: a cache filled with random tokens, queries, and the numpy
reference on the same decoded cache (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from reference import attention, visible_positions

import turbodecode as td


def decoded_rows(format: str, rows: np.ndarray, head_dim: int) -> np.ndarray:
    """Rows [..., D] as the cache holds them, in the basis attention reads them (TQ: rotated)."""
    if format == "f16":
        return rows.astype(np.float16).astype(np.float64)
    params = td.CodecParams(head_dim=head_dim, format=format)
    flat = rows.reshape(-1, head_dim)
    return td.decode_rows(params, *td.encode_rows(params, flat)).reshape(rows.shape)


@dataclass
class DecodeCase:
    config: td.KvCacheConfig
    options: td.DecodeOptions
    k: np.ndarray  # [slots, length, n_kv_heads, D]: the token appended at each position
    v: np.ndarray

    @staticmethod
    def make(rng, config: td.KvCacheConfig, options: td.DecodeOptions, length: int) -> DecodeCase:
        shape = (config.slots, length, config.n_kv_heads, config.head_dim)
        k = rng.standard_normal(shape).astype(np.float32)
        v = rng.standard_normal(shape).astype(np.float32)
        return DecodeCase(config, options, k, v)

    def fill(self, cache: td.KvCache, convert=np.ascontiguousarray) -> None:
        """Appends every slot's tokens in position order (one call per position); ``convert``
        turns the numpy inputs into the arrays the cache takes."""
        slots, length = self.k.shape[:2]
        slot_ids = convert(np.arange(slots, dtype=np.int32))
        for position in range(length):
            td.append_kv(cache, convert(self.k[:, position]), convert(self.v[:, position]),
                         slot_ids, convert(np.full(slots, position, np.int32)))

    def reference(self, q: np.ndarray, slot_ids, seq_pos) -> tuple[np.ndarray, np.ndarray]:
        """(out [n, n_heads, D], lse [n, n_heads]) in f64."""
        c, o = self.config, self.options
        k_format, v_format = c.k_format.value, c.v_format.value
        k_rows = decoded_rows(k_format, self.k, c.head_dim)
        v_rows = decoded_rows(v_format, self.v, c.head_dim)
        if td.is_turboquant(k_format):
            q = td.rotate_rows(c.head_dim, q.reshape(-1, c.head_dim)).reshape(q.shape)
        group = o.n_heads // c.n_kv_heads
        scale = o.scale if o.scale > 0 else 1.0 / np.sqrt(c.head_dim)
        outs, lses = [], []
        for i, (slot, position) in enumerate(zip(slot_ids, seq_pos)):
            seen = list(visible_positions(o.mask.value, int(position), c.capacity,
                                          o.sliding_window))
            keys = np.repeat(k_rows[slot, seen], group, axis=1)
            values = np.repeat(v_rows[slot, seen], group, axis=1)
            out, lse = attention(q[i], keys, values, scale, o.softcap)
            outs.append(out)
            lses.append(lse)
        out = np.stack(outs)
        if td.is_turboquant(v_format) and not o.rotated_output:
            flat = out.reshape(-1, c.head_dim).astype(np.float32)
            out = td.unrotate_rows(c.head_dim, flat).reshape(out.shape).astype(np.float64)
        return out, np.stack(lses)

    def queries(self, rng, slot_ids, seq_pos):
        q = rng.standard_normal((len(slot_ids), self.options.n_heads, self.config.head_dim))
        return (q.astype(np.float32), np.asarray(slot_ids, np.int32),
                np.asarray(seq_pos, np.int32))
