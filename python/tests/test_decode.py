"""plan_decode / run_decode through numpy arrays, against the numpy reference (SPEC §2)."""

from __future__ import annotations

import numpy as np
import pytest
from decode_case import DecodeCase
from reference import relative_l2

import turbodecode as td

# Q may be rounded to f16 before the dot product (SPEC §5).
TOLERANCE = 5e-3

FORMATS = [("f16", "tq8"), ("f16", "f16"), ("tq8", "tq8"), ("f16", "tq4"), ("fp8", "fp8"),
           ("f16", "tq3"), ("f16", "tq5"), ("f16", "tq6")]
# (layer kind, mask, capacity, window, query positions) after 80 tokens per slot. A ring keeps
# the last 48 positions, so its queries sit where every position they see is still there.
LAYOUTS = [("linear", "causal", 96, 0, [79, 5, 33, 79]),
           ("ring", "sliding_ring", 48, 40, [79, 72, 75, 79]),  # wrapped, window < capacity
           ("linear", "sliding_linear", 96, 24, [79, 5, 33, 79])]


def run_case(rng, case: DecodeCase, slot_ids, seq_pos, lse=False):
    cache = td.KvCache(case.config)
    case.fill(cache)
    plan = td.plan_decode(case.config, case.options, max_queries=len(slot_ids))
    q, slots, positions = case.queries(rng, slot_ids, seq_pos)
    out = np.full((len(slots), case.options.n_heads, case.config.head_dim), np.nan, np.float32)
    lse_out = np.full((len(slots), case.options.n_heads), np.nan, np.float32) if lse else None
    assert td.run_decode(plan, cache, q, slots, positions, out=out, lse=lse_out) is out
    expected, expected_lse = case.reference(q, slots, positions)
    return out, expected, lse_out, expected_lse


@pytest.mark.parametrize("k_format,v_format", FORMATS)
@pytest.mark.parametrize("kind,mask,capacity,window,seq_pos", LAYOUTS)
def test_matches_reference(rng, k_format, v_format, kind, mask, capacity, window, seq_pos):
    config = td.KvCacheConfig(slots=3, n_kv_heads=2, capacity=capacity, head_dim=256,
                              kind=kind, k_format=k_format, v_format=v_format)
    options = td.DecodeOptions(n_heads=4, mask=mask, sliding_window=window)
    case = DecodeCase.make(rng, config, options, 80)
    out, expected, _, _ = run_case(rng, case, [0, 2, 1, 2], seq_pos)
    assert relative_l2(out, expected) <= TOLERANCE


@pytest.mark.parametrize("v_format", ["tq8", "f16"])
def test_head_dim_512_gqa_8_softcap_and_scale(rng, v_format):
    config = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=64, head_dim=512,
                              v_format=v_format)
    options = td.DecodeOptions(n_heads=16, scale=1.0 / 8, softcap=5.0)  # softcap bites
    case = DecodeCase.make(rng, config, options, 64)
    out, expected, _, _ = run_case(rng, case, [1, 0], [63, 17])
    assert relative_l2(out, expected) <= TOLERANCE


def test_lse(rng):
    config = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=64, v_format="tq8")
    case = DecodeCase.make(rng, config, td.DecodeOptions(n_heads=4, softcap=20.0), 64)
    _, _, lse, expected = run_case(rng, case, [1, 0, 1], [63, 0, 40], lse=True)
    np.testing.assert_allclose(lse, expected, rtol=1e-4, atol=1e-4)


def test_rotated_output_is_the_rotated_result(rng):
    config = td.KvCacheConfig(slots=1, n_kv_heads=2, capacity=64, v_format="tq8")
    plain = DecodeCase.make(rng, config, td.DecodeOptions(n_heads=4), 50)
    rotated = DecodeCase(config, td.DecodeOptions(n_heads=4, rotated_output=True), plain.k,
                         plain.v)
    cache = td.KvCache(config)
    plain.fill(cache)
    q, slots, positions = plain.queries(rng, [0, 0], [49, 20])
    out = td.run_decode(td.plan_decode(config, plain.options, 2), cache, q, slots, positions)
    out_rotated = td.run_decode(td.plan_decode(config, rotated.options, 2), cache, q, slots,
                                positions)
    expected = td.rotate_rows(256, out.reshape(-1, 256)).reshape(out.shape)
    np.testing.assert_allclose(out_rotated, expected, atol=1e-5)


def test_a_row_is_the_same_alone_and_in_a_batch(rng):
    config = td.KvCacheConfig(slots=3, n_kv_heads=2, capacity=700, v_format="tq8")
    case = DecodeCase.make(rng, config, td.DecodeOptions(n_heads=4), 700)
    cache = td.KvCache(config)
    case.fill(cache)
    plan = td.plan_decode(config, case.options, 3)
    q, slots, positions = case.queries(rng, [2, 0, 1], [699, 3, 400])
    batch = td.run_decode(plan, cache, q, slots, positions)
    for i in range(3):
        alone = td.run_decode(plan, cache, q[i:i + 1], slots[i:i + 1], positions[i:i + 1])
        np.testing.assert_array_equal(alone[0], batch[i])


@pytest.mark.parametrize("kind,mask,window", [("linear", "causal", 0),
                                              ("ring", "sliding_ring", 40)])
def test_query_runs_equal_rows_run_one_at_a_time(rng, kind, mask, window):
    """A draft of 3 tokens per slot (SPEC §2.8) gives, bitwise, what each row gives alone."""
    config = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=64, kind=kind, v_format="tq8")
    runs = td.DecodeOptions(n_heads=4, mask=mask, sliding_window=window, query_tokens=3)
    single = td.DecodeOptions(n_heads=4, mask=mask, sliding_window=window)
    case = DecodeCase.make(rng, config, runs, 90 if kind == "ring" else 60)
    cache = td.KvCache(config)
    case.fill(cache)
    last = case.k.shape[1] - 1
    first = last - 9 if kind == "ring" else 10  # a ring keeps only its last 64 positions
    q, slots, positions = case.queries(rng, [1, 1, 1, 0, 0, 0],
                                       [last - 2, last - 1, last, first, first + 1, first + 2])
    together = td.run_decode(td.plan_decode(config, runs, 6), cache, q, slots, positions)
    plan_single = td.plan_decode(config, single, 1)
    for i in range(6):
        alone = td.run_decode(plan_single, cache, q[i:i + 1], slots[i:i + 1], positions[i:i + 1])
        np.testing.assert_array_equal(together[i], alone[0])
    expected, _ = case.reference(q, slots, positions)
    assert relative_l2(together, expected) <= TOLERANCE


def test_paged_cache_matches_the_reference(rng):
    page_size = 16
    contiguous = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=64, v_format="tq8")
    paged = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=64, v_format="tq8",
                             page_size=page_size, pages=9)
    case = DecodeCase.make(rng, paged, td.DecodeOptions(n_heads=4), 64)
    table = np.array([[8, 1, 6, 3], [2, 7, 0, 5]], np.int32)
    cache = td.KvCache(paged).view(table)
    case.fill(cache)
    q, slots, positions = case.queries(rng, [0, 1, 1], [63, 20, 47])
    out = td.run_decode(td.plan_decode(paged, case.options, 3), cache, q, slots, positions)
    expected, _ = case.reference(q, slots, positions)
    assert relative_l2(out, expected) <= TOLERANCE
    flat = td.KvCache(contiguous)
    DecodeCase(contiguous, case.options, case.k, case.v).fill(flat)
    out_flat = td.run_decode(td.plan_decode(contiguous, case.options, 3), flat, q, slots,
                             positions)
    np.testing.assert_allclose(out, out_flat, rtol=1e-6, atol=1e-6)


def test_fixed_chunk_positions(rng):
    """Rows cut into chunks of exactly 32 positions (merged through their lse) still match."""
    config = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=128, v_format="tq8")
    options = td.DecodeOptions(n_heads=4, fixed_chunk_positions=32)
    case = DecodeCase.make(rng, config, options, 100)
    plan = td.plan_decode(config, options, 2)
    assert plan.chunk_positions(100) == 32 and plan.max_chunks >= 4
    assert td.plan_decode(config, td.DecodeOptions(n_heads=4), 2).chunk_positions(100) > 32
    out, expected, lse, expected_lse = run_case(rng, case, [1, 0], [99, 70], lse=True)
    assert relative_l2(out, expected) <= TOLERANCE
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-4, atol=1e-4)
