"""The hyper-connection operators and the Q8_0 matvec through numpy arrays, against the numpy
references of SPEC §3 (f32 paths: relative error <= 1e-5)."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

import turbodecode as td

TOLERANCE = 1e-5


class HcInputs:
    def __init__(self, rng, params: td.HcParams, rows: int):
        n, e, m = params.n_hc, params.embd, params.mix_width
        self.params = params
        self.x = rng.standard_normal((rows, n, e)).astype(np.float32)
        self.mix = rng.standard_normal((rows, m)).astype(np.float32)
        self.scale = rng.uniform(0.5, 1.5, 3).astype(np.float32)
        self.base = rng.standard_normal(m).astype(np.float32) * 0.5
        self.norm_weight = rng.uniform(0.5, 1.5, e).astype(np.float32)
        self.mix_weight = (rng.standard_normal((m, n * e)) * 0.05).astype(np.float16)
        self.block = rng.standard_normal((rows, e)).astype(np.float32)
        self.add = rng.standard_normal((rows, e)).astype(np.float32)

    def reference_split(self):
        p = self.params
        return ref.hc_split(self.mix, self.scale, self.base, p.n_hc, p.sinkhorn_iters, p.eps)


@pytest.mark.parametrize("n_hc,embd,rows", [(4, 256, 3), (3, 96, 2), (1, 64, 1)])
def test_split_collapse_norm_match_reference(rng, n_hc, embd, rows):
    params = td.HcParams(n_hc=n_hc, embd=embd)
    a = HcInputs(rng, params, rows)
    split = td.hc_split(params, a.mix, a.scale, a.base)
    expected_split = a.reference_split()
    assert ref.relative_l2(split, expected_split) <= TOLERANCE
    comb = expected_split[:, 2 * n_hc:].reshape(rows, n_hc, n_hc)
    np.testing.assert_allclose(comb.sum(-2), 1.0, atol=1e-4)  # columns: the last normalisation

    pre = split[:, :n_hc]  # a strided view into split
    collapsed = td.hc_collapse(params, a.x, pre)
    assert ref.relative_l2(collapsed, ref.hc_collapse(a.x, pre)) <= TOLERANCE
    normed = td.hc_rms_norm(params, collapsed, a.norm_weight)
    expected = ref.rms_norm(collapsed, a.norm_weight, params.norm_eps)
    assert ref.relative_l2(normed, expected) <= TOLERANCE

    fused = td.hc_split_collapse_norm(params, a.mix, a.scale, a.base, a.x, a.norm_weight)
    for got, want in zip(fused, (split, collapsed, normed)):
        np.testing.assert_array_equal(got, want)
    pair = td.hc_split_collapse(params, a.mix, a.scale, a.base, a.x)
    np.testing.assert_array_equal(pair[0], split)
    np.testing.assert_array_equal(pair[1], collapsed)


@pytest.mark.parametrize("with_add", [False, True])
def test_expand_matches_reference(rng, with_add):
    params = td.HcParams(n_hc=4, embd=128)
    a = HcInputs(rng, params, 2)
    split = a.reference_split().astype(np.float32)
    post, comb = split[:, 4:8], split[:, 8:].reshape(2, 4, 4)
    add = a.add if with_add else None
    out = td.hc_expand(params, a.block, a.x, post, comb, add=add)
    assert out.shape == (2, 4, 128)
    assert ref.relative_l2(out, ref.hc_expand(a.block, add, a.x, post, comb)) <= TOLERANCE


def test_head_weights_match_reference(rng):
    params = td.HcParams(n_hc=4, embd=64)
    logits = rng.standard_normal((3, 4)).astype(np.float32)
    scale = np.array([0.7], np.float32)
    base = rng.standard_normal(4).astype(np.float32)
    weights = td.hc_head_weights(params, 1.5, logits, scale, base)
    expected = 1.5 * ref.sigmoid(logits * 0.7 + base) + params.eps
    assert ref.relative_l2(weights, expected) <= TOLERANCE


@pytest.mark.parametrize("rows", [1, 5])
def test_norm_mix_and_pre_match_reference(rng, rows):
    params = td.HcParams(n_hc=4, embd=512)
    a = HcInputs(rng, params, rows)
    plan = td.plan_hc_pre(params, max_rows=8, device="cpu")
    assert plan.workspace_bytes == 0
    mix = td.hc_norm_mix(plan, a.x, a.mix_weight)
    expected_mix = ref.norm_mix(a.x, a.mix_weight, params.norm_eps)
    assert ref.relative_l2(mix, expected_mix) <= TOLERANCE
    outputs = td.hc_pre(plan, a.x, a.mix_weight, a.scale, a.base, a.norm_weight)
    expected = (mix,) + td.hc_split_collapse_norm(params, mix, a.scale, a.base, a.x,
                                                  a.norm_weight)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)


def test_q8_matvec_and_fusions(rng):
    params = td.HcParams(n_hc=4, embd=64)
    cols, rows = 128, 2
    weight = td.quantize_q8_0(rng.standard_normal((64, cols)).astype(np.float32))
    assert weight.shape == (64, td.q8_row_bytes(cols)) and weight.dtype == np.uint8
    dense = ref.q8_dequantize(weight, cols)
    inputs = rng.standard_normal((rows, cols)).astype(np.float32)
    product = td.q8_matvec(weight, inputs)
    assert ref.relative_l2(product, inputs.astype(np.float64) @ dense.T) <= TOLERANCE

    a = HcInputs(rng, params, rows)
    split = a.reference_split().astype(np.float32)
    post, comb = split[:, 4:8], split[:, 8:].reshape(rows, 4, 4)
    block, out = td.hc_expand_q8(params, weight, inputs, a.x, post, comb)
    np.testing.assert_array_equal(block, product)
    np.testing.assert_array_equal(out, td.hc_expand(params, product, a.x, post, comb))
    shared, out = td.hc_expand_shared_q8(params, weight, inputs, a.block, a.x, post, comb)
    np.testing.assert_array_equal(shared, product)
    np.testing.assert_array_equal(out, td.hc_expand(params, a.block, a.x, post, comb,
                                                    add=product))
