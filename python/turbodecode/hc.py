"""DeepSeek-V4 manifold-constrained hyper-connection (mHC) operators (hc.h; SPEC §3).

Shapes, for T token rows, n = n_hc streams, E = embd and M = hc_mix_width(n):
x [T, n, E], mix [T, M], split [T, M] (pre [0, n), post [n, 2n), comb (r, c) at 2n + r·n + c),
pre/post [T, n] and comb [T, n, n] (any strides: slice them out of ``split``), rows [T, E]; all
float32 unless noted. Outputs not given are allocated like the first array argument; given ones
are written in place. Every operator runs on the CPU or CUDA, chosen by the arrays' device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import _arrays
from . import _turbodecode as _ext

#: Most streams an HC operator takes.
MAX_HC_STREAMS = _ext.MAX_HC_STREAMS


def hc_mix_width(n_hc: int) -> int:
    """M = 2·n + n²: pre, post and the comb matrix."""
    return _ext.hc_mix_width(n_hc)


@dataclass(frozen=True)
class HcParams:
    """Shape and constants of the HC operators (the C++ HcParams)."""

    n_hc: int = 4  #: streams, 1..16 (4 is the fast path)
    embd: int = 4096  #: E, the width of one stream
    sinkhorn_iters: int = 20  #: >= 1; the last step is always a column normalisation
    eps: float = 1e-6  #: split ε (pre offset and Sinkhorn denominators)
    norm_eps: float = 1e-6  #: ε_rms of the RMSNorms
    #: M = hc_mix_width(n_hc)
    mix_width: int = field(init=False, repr=False, compare=False)
    #: The parameters as one string: what torch.ops.turbodecode.hc_* take as ``params``.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mix_width", hc_mix_width(self.n_hc))
        key = _ext.hc_params_key(self.n_hc, self.embd, self.sinkhorn_iters, self.eps,
                                 self.norm_eps)
        object.__setattr__(self, "key", key)


@dataclass(frozen=True)
class HcPrePlan:
    """What plan_hc_pre decided for norm-mix and HC-pre."""

    params: HcParams
    device: str
    max_rows: int
    chunks: int  #: 256-column chunks per row (CUDA)
    workspace_bytes: int  #: size of the workspace argument (0 on the CPU)
    key: str = field(repr=False, compare=False)


def plan_hc_pre(params: HcParams, max_rows: int, device: str) -> HcPrePlan:
    """Plans norm-mix / HC-pre for up to ``max_rows`` rows on ``device`` ("cpu" or "cuda")."""
    fields = _ext.plan_hc_pre(params.key, max_rows, device)
    return HcPrePlan(params, device, max_rows, fields["chunks"], fields["workspace_bytes"],
                     fields["key"])


def _rows(array: Any, name: str) -> int:
    return _arrays.shape(array, name)[0]


def hc_split(params: HcParams, mix: Any, scale: Any, base: Any, split: Any = None) -> Any:
    """split: mix [T, M], scale [3] (s0 pre, s1 post, s2 comb), base [M] -> split [T, M]."""
    if split is None:
        split = _arrays.empty(mix, (_rows(mix, "mix"), params.mix_width), "float32")
    _arrays.call("hc_split", mix, params.key, mix, scale, base, split)
    return split


def hc_collapse(params: HcParams, x: Any, pre: Any, out: Any = None) -> Any:
    """collapse: out[t][d] = Σ_h pre[t][h]·x[t][h][d] (h ascending) -> out [T, E]."""
    if out is None:
        out = _arrays.empty(x, (_rows(x, "x"), params.embd), "float32")
    _arrays.call("hc_collapse", x, params.key, x, pre, out)
    return out


def hc_rms_norm(params: HcParams, u: Any, weight: Any, out: Any = None) -> Any:
    """Weighted RMSNorm of rows: out = u·(1/sqrt(mean(u²) + norm_eps))·weight; weight [E]."""
    if out is None:
        out = _arrays.empty(u, (_rows(u, "u"), params.embd), "float32")
    _arrays.call("hc_rms_norm", u, params.key, u, weight, out)
    return out


def hc_split_collapse(params: HcParams, mix: Any, scale: Any, base: Any, x: Any,
                      split: Any = None, collapsed: Any = None) -> tuple[Any, Any]:
    """split, then collapse with its pre weights -> (split, collapsed); bitwise equal to
    hc_split followed by hc_collapse on the same backend."""
    rows = _rows(mix, "mix")
    if split is None:
        split = _arrays.empty(mix, (rows, params.mix_width), "float32")
    if collapsed is None:
        collapsed = _arrays.empty(mix, (rows, params.embd), "float32")
    _arrays.call("hc_split_collapse", mix, params.key, mix, scale, base, x, split, collapsed)
    return split, collapsed


def hc_split_collapse_norm(params: HcParams, mix: Any, scale: Any, base: Any, x: Any,
                           norm_weight: Any, split: Any = None, collapsed: Any = None,
                           normed: Any = None) -> tuple[Any, Any, Any]:
    """split + collapse + weighted RMSNorm (norm_weight [E]) -> (split, collapsed, normed);
    bitwise equal to hc_split, hc_collapse, hc_rms_norm on the same backend."""
    rows = _rows(mix, "mix")
    if split is None:
        split = _arrays.empty(mix, (rows, params.mix_width), "float32")
    if collapsed is None:
        collapsed = _arrays.empty(mix, (rows, params.embd), "float32")
    if normed is None:
        normed = _arrays.empty(mix, (rows, params.embd), "float32")
    _arrays.call("hc_split_collapse_norm", mix, params.key, mix, scale, base, x, norm_weight,
                 split, collapsed, normed)
    return split, collapsed, normed


def hc_expand(params: HcParams, block: Any, x: Any, post: Any, comb: Any, add: Any = None,
              out: Any = None) -> Any:
    """HC-post: out[t][c][d] = (block[t][d] [+ add[t][d]])·post[t][c]
    + Σ_r comb[t][r][c]·x[t][r][d] (r ascending) -> out [T, n, E]. ``add`` (optional) is the
    second block input."""
    if out is None:
        out = _arrays.empty(x, (_rows(x, "x"), params.n_hc, params.embd), "float32")
    _arrays.call("hc_expand", x, params.key, block, add, x, post, comb, out)
    return out


def hc_head_weights(params: HcParams, post_scale: float, logits: Any, scale: Any, base: Any,
                    weights: Any = None) -> Any:
    """Output-head weights: w[t][h] = post_scale·σ(logits[t][h]·scale[0] + base[h]) + eps;
    logits [T, n], scale [1], base [n] -> weights [T, n] (SPEC §3.5)."""
    if weights is None:
        weights = _arrays.empty(logits, (_rows(logits, "logits"), params.n_hc), "float32")
    _arrays.call("hc_head_weights", logits, params.key, post_scale, logits, scale, base, weights)
    return weights


def _pre_workspace(plan: HcPrePlan, like: Any, workspace: Any) -> Any:
    # A fresh workspace must start zeroed (hc.h); a caller's own one stays zeroed between runs.
    if workspace is None and plan.workspace_bytes > 0:
        workspace = _arrays.zeros(like, (plan.workspace_bytes,), "uint8")
    return workspace


def hc_norm_mix(plan: HcPrePlan, x: Any, mix_weight: Any, mix: Any = None,
                workspace: Any = None) -> Any:
    """norm-mix: ρ = 1/sqrt(mean(x²) + norm_eps) over the whole n·E row,
    mix[k] = ρ·Σ_i W[k][i]·x_i; x [T, n, E], mix_weight [M, n·E] float16 -> mix [T, M].
    ``workspace``: uint8 [plan.workspace_bytes], zero-filled once (a new one per call if absent)."""
    if mix is None:
        mix = _arrays.empty(x, (_rows(x, "x"), plan.params.mix_width), "float32")
    workspace = _pre_workspace(plan, x, workspace)
    _arrays.call("hc_norm_mix", x, plan.key, x, mix_weight, mix, workspace)
    return mix


def hc_pre(plan: HcPrePlan, x: Any, mix_weight: Any, scale: Any, base: Any, norm_weight: Any,
           mix: Any = None, split: Any = None, collapsed: Any = None, normed: Any = None,
           workspace: Any = None) -> tuple[Any, Any, Any, Any]:
    """HC-pre in one launch: norm-mix -> split -> collapse -> weighted RMSNorm
    -> (mix, split, collapsed, normed); bitwise equal to hc_norm_mix then hc_split_collapse_norm."""
    rows, width = _rows(x, "x"), plan.params.mix_width
    if mix is None:
        mix = _arrays.empty(x, (rows, width), "float32")
    if split is None:
        split = _arrays.empty(x, (rows, width), "float32")
    if collapsed is None:
        collapsed = _arrays.empty(x, (rows, plan.params.embd), "float32")
    if normed is None:
        normed = _arrays.empty(x, (rows, plan.params.embd), "float32")
    workspace = _pre_workspace(plan, x, workspace)
    _arrays.call("hc_pre", x, plan.key, x, mix_weight, scale, base, norm_weight, mix, split,
                 collapsed, normed, workspace)
    return mix, split, collapsed, normed


def hc_expand_q8(params: HcParams, weight: Any, input: Any, x: Any, post: Any, comb: Any,
                 block: Any = None, out: Any = None) -> tuple[Any, Any]:
    """Attention output: block = weight·input (Q8_0 weight uint8 [E, cols/32·34], input
    [T, cols]), then expand with it -> (block [T, E], out [T, n, E])."""
    rows = _rows(input, "input")
    if block is None:
        block = _arrays.empty(input, (rows, params.embd), "float32")
    if out is None:
        out = _arrays.empty(input, (rows, params.n_hc, params.embd), "float32")
    _arrays.call("hc_expand_q8", input, params.key, weight, input, block, x, post, comb, out)
    return block, out


def hc_expand_shared_q8(params: HcParams, weight: Any, input: Any, routed: Any, x: Any,
                        post: Any, comb: Any, shared: Any = None,
                        out: Any = None) -> tuple[Any, Any]:
    """Shared-expert down: shared = weight·input, stored; then expand with routed + shared
    -> (shared [T, E], out [T, n, E])."""
    rows = _rows(input, "input")
    if shared is None:
        shared = _arrays.empty(input, (rows, params.embd), "float32")
    if out is None:
        out = _arrays.empty(input, (rows, params.n_hc, params.embd), "float32")
    _arrays.call("hc_expand_shared_q8", input, params.key, weight, input, routed, shared, x, post,
                 comb, out)
    return shared, out
