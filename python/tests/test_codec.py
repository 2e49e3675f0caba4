"""The row codec through numpy arrays: round trips, rotations, shapes and in-place outputs."""

from __future__ import annotations

import numpy as np
import pytest
from reference import cosine

import turbodecode as td

# Mean round-trip cosine on i.i.d. N(0, 1) rows (SPEC §1.2, §1.5); FP8 keeps 3 mantissa bits.
MIN_MEAN_COSINE = {"tq3": 0.98, "tq4": 0.99, "tq5": 0.998, "tq6": 0.999, "tq8": 0.9999,
                   "fp8": 0.999}
ROW_BYTES_D256 = {"f16": 512, "fp8": 256, "tq3": 96, "tq4": 128, "tq5": 160, "tq6": 192,
                  "tq8": 256}


def test_format_table_matches_the_spec():
    assert [f.value for f in td.RowFormat] == ["f16", "fp8", "tq3", "tq4", "tq5", "tq6", "tq8"]
    for name, expected in ROW_BYTES_D256.items():
        assert td.row_bytes(name, 256) == expected
        assert td.row_bytes(td.RowFormat(name), 512) == 2 * expected
    assert td.row_scales("f16", 256) == 0
    assert td.row_scales("fp8", 512) == 1
    assert td.row_scales("tq8", 512) == td.norms_per_row(512) == 2
    assert td.format_bits("tq5") == 5 and td.format_bits("f16") == 16
    assert td.is_quantized("fp8") and not td.is_turboquant("fp8")
    assert td.is_turboquant("tq3") and not td.is_quantized("f16")


@pytest.mark.parametrize("head_dim", [256, 512])
@pytest.mark.parametrize("format", list(MIN_MEAN_COSINE))
def test_round_trip(rng, format, head_dim):
    params = td.CodecParams(head_dim=head_dim, format=format)
    x = rng.standard_normal((64, head_dim)).astype(np.float32)
    codes, norms = td.encode_rows(params, x)
    assert codes.shape == (64, td.row_bytes(format, head_dim)) and codes.dtype == np.uint8
    assert norms.shape == (64, td.row_scales(format, head_dim)) and norms.dtype == np.float32
    y = td.decode_rows(params, codes, norms)
    x_hat = td.unrotate_rows(head_dim, y) if td.is_turboquant(format) else y
    assert cosine(x_hat, x).mean() >= MIN_MEAN_COSINE[format]


@pytest.mark.parametrize("format", ["tq4", "tq8"])
def test_given_outputs_are_written_in_place(rng, format):
    params = td.CodecParams(head_dim=256, format=format)
    x = rng.standard_normal((8, 256)).astype(np.float16)
    codes = np.full((8, params.row_bytes), 0xAB, np.uint8)
    norms = np.full((8, params.row_scales), np.nan, np.float32)
    returned = td.encode_rows(params, x, codes, norms)
    assert returned[0] is codes and returned[1] is norms
    expected_codes, expected_norms = td.encode_rows(params, x.astype(np.float32))
    np.testing.assert_array_equal(codes, expected_codes)
    np.testing.assert_array_equal(norms, expected_norms)
    y = np.full((8, 256), np.nan, np.float32)
    assert td.decode_rows(params, codes, norms, y) is y and np.all(np.isfinite(y))


@pytest.mark.parametrize("head_dim", [256, 512])
def test_rotation_is_orthogonal_and_inverted(rng, head_dim):
    x = rng.standard_normal((16, head_dim)).astype(np.float32)
    y = td.rotate_rows(head_dim, x)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)
    assert np.abs(y - x).max() > 0.1  # it does rotate
    np.testing.assert_allclose(td.unrotate_rows(head_dim, y), x, atol=1e-5)
    in_place = x.copy()
    td.rotate_rows(head_dim, in_place, in_place)
    np.testing.assert_array_equal(in_place, y)


def test_strided_rows(rng):
    """Every other row of a larger array, read and written through strides, without copies."""
    params = td.CodecParams(head_dim=256, format="tq8")
    x = rng.standard_normal((16, 256)).astype(np.float32)
    y = np.full((16, 256), np.nan, np.float32)
    codes, norms = td.encode_rows(params, x[::2])
    td.decode_rows(params, codes, norms, y[1::2])
    assert np.all(np.isnan(y[::2]))
    expected = td.decode_rows(params, *td.encode_rows(params, np.ascontiguousarray(x[::2])))
    np.testing.assert_array_equal(y[1::2], expected)
