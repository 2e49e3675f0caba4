"""The torch.library registration of every operator as ``torch.ops.turbodecode.<name>``.

Each operator runs the extension function of the same name on torch's current CUDA stream (the
extension reads it), returns nothing and writes the arguments its schema marks ``(x!)``; its fake
implementation writes nothing, so torch.compile traces every call without a graph break and
functionalizes the writes. Configurations travel as keys (``str plan``, ``str cache``,
``str params``): the ``key`` attribute of DecodePlan, KvCacheConfig, HcParams and HcPrePlan.
"""

from __future__ import annotations

import torch

from . import _turbodecode as _ext

SCHEMAS = {
    "append_kv": "(str cache, Tensor(a!) k_cache, Tensor(b!)? k_norms, Tensor(c!) v_cache, "
    "Tensor(d!)? v_norms, Tensor? block_table, Tensor k, Tensor v, Tensor slot_ids, "
    "Tensor positions) -> ()",
    "run_decode": "(str plan, Tensor k_cache, Tensor? k_norms, Tensor v_cache, Tensor? v_norms, "
    "Tensor? block_table, Tensor q, Tensor slot_ids, Tensor seq_pos, Tensor(a!) out, "
    "Tensor(b!)? lse, Tensor(c!) workspace) -> ()",
    "encode_rows": "(int head_dim, str format, float scale_factor_d512, Tensor x, "
    "Tensor(a!) codes, Tensor(b!) norms) -> ()",
    "decode_rows": "(int head_dim, str format, float scale_factor_d512, Tensor codes, "
    "Tensor norms, Tensor(a!) y) -> ()",
    "rotate_rows": "(int head_dim, Tensor x, Tensor(a!) y) -> ()",
    "unrotate_rows": "(int head_dim, Tensor y, Tensor(a!) x) -> ()",
    "hc_split": "(str params, Tensor mix, Tensor scale, Tensor base, Tensor(a!) split) -> ()",
    "hc_collapse": "(str params, Tensor x, Tensor pre, Tensor(a!) out) -> ()",
    "hc_rms_norm": "(str params, Tensor u, Tensor weight, Tensor(a!) out) -> ()",
    "hc_split_collapse": "(str params, Tensor mix, Tensor scale, Tensor base, Tensor x, "
    "Tensor(a!) split, Tensor(b!) collapsed) -> ()",
    "hc_split_collapse_norm": "(str params, Tensor mix, Tensor scale, Tensor base, Tensor x, "
    "Tensor norm_weight, Tensor(a!) split, Tensor(b!) collapsed, Tensor(c!) normed) -> ()",
    "hc_expand": "(str params, Tensor block, Tensor? add, Tensor x, Tensor post, Tensor comb, "
    "Tensor(a!) out) -> ()",
    "hc_head_weights": "(str params, float post_scale, Tensor logits, Tensor scale, Tensor base, "
    "Tensor(a!) weights) -> ()",
    "hc_norm_mix": "(str plan, Tensor x, Tensor mix_weight, Tensor(a!) mix, "
    "Tensor(b!)? workspace) -> ()",
    "hc_pre": "(str plan, Tensor x, Tensor mix_weight, Tensor scale, Tensor base, "
    "Tensor norm_weight, Tensor(a!) mix, Tensor(b!) split, Tensor(c!) collapsed, "
    "Tensor(d!) normed, Tensor(e!)? workspace) -> ()",
    "hc_expand_q8": "(str params, Tensor weight, Tensor input, Tensor(a!) block, Tensor x, "
    "Tensor post, Tensor comb, Tensor(b!) out) -> ()",
    "hc_expand_shared_q8": "(str params, Tensor weight, Tensor input, Tensor routed, "
    "Tensor(a!) shared, Tensor x, Tensor post, Tensor comb, Tensor(b!) out) -> ()",
    "quantize_q8_0": "(Tensor src, Tensor(a!) dst) -> ()",
    "q8_matvec": "(Tensor weight, Tensor input, Tensor(a!) out) -> ()",
}


def _writes_nothing(*args: object) -> None:
    """Fake implementation: every operator only writes arguments it is given."""
    return None


def register() -> torch.library.Library:
    """Defines the operators; the returned library must stay referenced."""
    library = torch.library.Library("turbodecode", "DEF")
    for name, schema in SCHEMAS.items():
        library.define(name + schema)
        kernel = getattr(_ext, name)
        library.impl(name, kernel, "CPU")
        library.impl(name, kernel, "CUDA")
        torch.library.register_fake(f"turbodecode::{name}", _writes_nothing, lib=library)
    return library


LIBRARY = register()
