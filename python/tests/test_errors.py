"""Errors: ValueError (turbodecode.InvalidArgument) or TypeError, naming the argument, and
nothing written (SPEC §7)."""

from __future__ import annotations

import numpy as np
import pytest

import turbodecode as td


@pytest.fixture
def decode_setup(rng):
    config = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=32, v_format="tq8")
    cache = td.KvCache(config)
    k = rng.standard_normal((2, 2, 256)).astype(np.float32)
    td.append_kv(cache, k, k, np.array([0, 1], np.int32), np.array([0, 0], np.int32))
    plan = td.plan_decode(config, td.DecodeOptions(n_heads=4), 2)
    q = rng.standard_normal((2, 4, 256)).astype(np.float32)
    return config, cache, plan, q


def test_invalid_argument_is_a_value_error_naming_the_argument():
    with pytest.raises(td.InvalidArgument) as raised:
        td.KvCacheConfig(capacity=8, head_dim=100)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, td.Error)
    assert raised.value.argument == "head_dim"
    assert "256 or 512" in raised.value.rule and "head_dim" in str(raised.value)


@pytest.mark.parametrize("field,value", [("kind", "circular"), ("v_format", "tq7"),
                                         ("k_format", "int4")])
def test_unknown_names_are_rejected(field, value):
    with pytest.raises(ValueError, match=value):
        td.KvCacheConfig(capacity=8, **{field: value})


def test_bad_options_name_the_option():
    config = td.KvCacheConfig(capacity=8, n_kv_heads=2)
    with pytest.raises(td.InvalidArgument) as raised:
        td.plan_decode(config, td.DecodeOptions(n_heads=3, mask="causal"), 1)
    assert raised.value.argument == "options.n_heads"
    with pytest.raises(ValueError, match="options.mask"):
        td.plan_decode(config, td.DecodeOptions(n_heads=2, mask="sliding"), 1)
    with pytest.raises(ValueError, match="max_queries"):
        td.plan_decode(config, td.DecodeOptions(n_heads=2), 0)


def test_nothing_is_written_when_an_index_is_bad(decode_setup):
    config, cache, plan, q = decode_setup
    out = np.full((2, 4, 256), np.nan, np.float32)
    with pytest.raises(td.InvalidArgument) as raised:
        td.run_decode(plan, cache, q, np.array([0, 2], np.int32), np.array([0, 0], np.int32),
                      out=out)
    assert raised.value.argument == "slot_ids"
    assert np.all(np.isnan(out))


@pytest.mark.parametrize("argument,replace", [
    ("q", lambda q, s, p, o: (q[:, :3], s, p, o)),
    ("seq_pos", lambda q, s, p, o: (q, s, p.astype(np.float32), o)),
    ("out", lambda q, s, p, o: (q, s, p, o[:1])),
])
def test_wrong_shapes_and_dtypes_name_the_argument(decode_setup, argument, replace):
    _, cache, plan, q = decode_setup
    out = np.full((2, 4, 256), np.nan, np.float32)
    args = replace(q, np.array([0, 1], np.int32), np.array([0, 0], np.int32), out)
    with pytest.raises(td.InvalidArgument) as raised:
        td.run_decode(plan, cache, *args[:3], out=args[3])
    assert raised.value.argument == argument
    assert np.all(np.isnan(out))


def test_type_errors_name_the_argument(decode_setup):
    _, cache, plan, q = decode_setup
    slots, positions = np.array([0, 1], np.int32), np.array([0, 0], np.int32)
    with pytest.raises(TypeError, match="'q'"):
        td.run_decode(plan, cache, [[1.0]], slots, positions)
    with pytest.raises(TypeError, match="'slot_ids'.*list"):
        td.run_decode(plan, cache, q, [0, 1], positions)
    with pytest.raises(TypeError, match="'q'.*dtype"):
        td.run_decode(plan, cache, q.astype(np.float64), slots, positions)
    read_only = np.zeros((2, 4, 256), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(TypeError, match="'out'.*writable"):
        td.run_decode(plan, cache, q, slots, positions, out=read_only)


def test_too_many_dimensions(decode_setup):
    _, cache, plan, q = decode_setup
    with pytest.raises(td.InvalidArgument, match="dimensions") as raised:
        td.run_decode(plan, cache, q[None, None], np.zeros(2, np.int32), np.zeros(2, np.int32))
    assert raised.value.argument == "q"


def test_a_plan_for_another_cache_is_rejected(decode_setup):
    _, cache, _, q = decode_setup
    other = td.KvCacheConfig(slots=2, n_kv_heads=2, capacity=64, v_format="tq8")
    plan = td.plan_decode(other, td.DecodeOptions(n_heads=4), 2)
    with pytest.raises(ValueError, match="cache"):
        td.run_decode(plan, cache, q, np.zeros(2, np.int32), np.zeros(2, np.int32))
