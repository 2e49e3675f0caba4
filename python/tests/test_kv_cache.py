"""KvCache storage and append_kv through numpy arrays (SPEC §1.3, §1.7)."""

from __future__ import annotations

import numpy as np
import pytest

import turbodecode as td

FORMAT_PAIRS = [("f16", "tq8"), ("f16", "tq4"), ("f16", "f16"), ("tq8", "tq8"), ("fp8", "fp8"),
                ("f16", "tq3"), ("f16", "tq5"), ("tq6", "tq6")]


def expected_rows(format: str, rows: np.ndarray, head_dim: int) -> tuple[np.ndarray, object]:
    """What the cache stores for ``rows`` [n, D]: the codec's own output, or f16 values."""
    if format == "f16":
        return rows.astype(np.float16), None
    return td.encode_rows(td.CodecParams(head_dim=head_dim, format=format), rows)


def test_sizes_match_the_spec():
    def per_position(k, v):
        return td.bytes_per_position(td.KvCacheConfig(capacity=1, k_format=k, v_format=v))

    assert per_position("f16", "f16") == 1024
    assert per_position("f16", "tq8") == 772
    assert per_position("tq8", "tq8") == 520
    assert per_position("f16", "tq4") == 644


@pytest.mark.parametrize("k_format,v_format", FORMAT_PAIRS)
def test_storage_shapes(k_format, v_format):
    config = td.KvCacheConfig(slots=3, n_kv_heads=2, capacity=40, head_dim=512,
                              k_format=k_format, v_format=v_format)
    cache = td.KvCache(config)
    for rows, norms, format in ((cache.k, cache.k_norms, k_format),
                                (cache.v, cache.v_norms, v_format)):
        if format == "f16":
            assert rows.shape == (3, 2, 40, 512) and rows.dtype == np.float16 and norms is None
        else:
            assert rows.shape == (3, 2, 40, td.row_bytes(format, 512)) and rows.dtype == np.uint8
            assert norms.shape == (3, 2, 40, td.row_scales(format, 512))
        assert not rows.any() and (norms is None or not norms.any())
    assert cache.bytes == 3 * 2 * 40 * td.bytes_per_position(config)


@pytest.mark.parametrize("k_format,v_format", FORMAT_PAIRS)
@pytest.mark.parametrize("kind", ["linear", "ring"])
def test_append_writes_the_named_rows_only(rng, k_format, v_format, kind):
    config = td.KvCacheConfig(slots=3, n_kv_heads=2, capacity=16, head_dim=256, kind=kind,
                              k_format=k_format, v_format=v_format)
    cache = td.KvCache(config)
    for array in (cache.k, cache.k_norms, cache.v, cache.v_norms):
        if array is not None:
            array.view(np.uint8)[...] = 0x5A  # anything but what append writes
    before = [None if a is None else a.copy() for a in (cache.k, cache.k_norms, cache.v,
                                                        cache.v_norms)]
    slots = np.array([2, 0, 2], np.int32)
    positions = np.array([3, 7, 21 if kind == "ring" else 9], np.int32)
    k = rng.standard_normal((3, 2, 256)).astype(np.float32)
    v = rng.standard_normal((3, 2, 256)).astype(np.float32)
    td.append_kv(cache, k, v, slots, positions)

    written = np.zeros((3, 2, 16), bool)
    for i, (slot, position) in enumerate(zip(slots, positions)):
        row = position % 16
        written[slot, :, row] = True
        for side, inputs, format in ((0, k, k_format), (2, v, v_format)):
            rows, norms = expected_rows(format, inputs[i], 256)
            stored = (cache.k, cache.k_norms, cache.v, cache.v_norms)
            np.testing.assert_array_equal(stored[side][slot, :, row], rows)
            if norms is not None:
                np.testing.assert_array_equal(stored[side + 1][slot, :, row], norms)
    for now, then in zip((cache.k, cache.k_norms, cache.v, cache.v_norms), before):
        if now is not None:
            np.testing.assert_array_equal(now[~written], then[~written])


@pytest.mark.parametrize("page_size", [16, 32])
def test_paged_append_follows_the_block_table(rng, page_size):
    config = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=4 * page_size, head_dim=256,
                              v_format="tq8", page_size=page_size, pages=8)
    cache = td.KvCache(config)
    assert cache.k.shape == (8, 2, page_size, 256)
    assert cache.v.shape == (8, 2, page_size, 256) and cache.v_norms.shape == (8, 2, page_size, 1)
    assert td.pages_per_slot(config) == 4
    table = np.array([[5, 1, 6, 0], [2, 7, 3, 4]], np.int32)
    paged = cache.view(table)
    assert paged.k is cache.k and paged.block_table is table
    positions = np.array([0, page_size + 3, 3 * page_size - 1], np.int32)
    slots = np.array([0, 1, 1], np.int32)
    k = rng.standard_normal((3, 2, 256)).astype(np.float32)
    v = rng.standard_normal((3, 2, 256)).astype(np.float32)
    td.append_kv(paged, k, v, slots, positions)
    for i, (slot, position) in enumerate(zip(slots, positions)):
        page = table[slot, position // page_size]
        row = position % page_size
        np.testing.assert_array_equal(cache.k[page, :, row], k[i].astype(np.float16))
        codes, norms = expected_rows("tq8", v[i], 256)
        np.testing.assert_array_equal(cache.v[page, :, row], codes)
        np.testing.assert_array_equal(cache.v_norms[page, :, row], norms)
    assert np.count_nonzero(np.any(cache.k != 0, axis=-1)) == 3 * 2


def test_from_arrays_uses_the_callers_storage(rng):
    config = td.KvCacheConfig(slots=1, n_kv_heads=1, capacity=8, v_format="tq8")
    owned = td.KvCache(config)
    k, kn, v, vn = (np.zeros_like(a) if a is not None else None
                    for a in (owned.k, owned.k_norms, owned.v, owned.v_norms))
    cache = td.KvCache.from_arrays(config, k, kn, v, vn)
    x = rng.standard_normal((1, 1, 256)).astype(np.float32)
    td.append_kv(cache, x, x, np.zeros(1, np.int32), np.array([5], np.int32))
    assert k[0, 0, 5].any() and v[0, 0, 5].any() and not owned.k.any()
