#!/usr/bin/env python3
"""The DeepSeek-V4 hyper-connection math in plain PyTorch: the peer of bench/hc_bench (SPEC §6).

Same shapes as hc_bench (E 4096, n_hc 4, M 24, T in {1, 32, 512}, Q8_0 shared-expert down
2048 -> 4096) and the same ops, written the straightforward way with torch operators:
norm-mix (f32 matmul against the mix matrix widened once), split with a 20-iteration Sinkhorn
loop, collapse, RMSNorm, expand, Q8_0 matvec (int8 weights and f16 block scales, dequantized
per call), and one layer's HC chain. Timing: CUDA events, warm-up, median, eager and replayed
from a torch.cuda.CUDAGraph (µs per call); inputs rotate among enough copies to exceed the L2.

    hc_torch.py [--quick] [--json PATH]
"""
import argparse
import json

import torch

from cuda_timing import median_event_us, median_graph_us

N_HC, EMBD, SHARED = 4, 4096, 2048
MIX = 2 * N_HC + N_HC * N_HC
ITERS, EPS, NORM_EPS = 20, 1e-6, 1e-6
ROTATION_BYTES = 200 << 20
MAX_ROTATION = 16


# ---- the math (SPEC §3) -------------------------------------------------------------------

def norm_mix(x, w32):
    flat = x.reshape(x.shape[0], -1)
    rho = torch.rsqrt(flat.square().mean(-1, keepdim=True) + NORM_EPS)
    return (flat * rho) @ w32.t()


def split(mix, scale, base):
    n = N_HC
    pre = torch.sigmoid(mix[:, :n] * scale[0] + base[:n]) + EPS
    post = 2.0 * torch.sigmoid(mix[:, n:2 * n] * scale[1] + base[n:2 * n])
    z = (mix[:, 2 * n:] * scale[2] + base[2 * n:]).view(-1, n, n)
    c = torch.softmax(z, dim=-1) + EPS
    c = c / (c.sum(-2, keepdim=True) + EPS)
    for _ in range(ITERS - 1):
        c = c / (c.sum(-1, keepdim=True) + EPS)
        c = c / (c.sum(-2, keepdim=True) + EPS)
    return pre, post, c


def collapse(x, pre):
    return (pre.unsqueeze(-1) * x).sum(1)


def rms_norm(u, weight):
    return u * torch.rsqrt(u.square().mean(-1, keepdim=True) + NORM_EPS) * weight


def expand(block, x, post, comb, add=None):
    if add is not None:
        block = block + add
    return block.unsqueeze(1) * post.unsqueeze(-1) + torch.einsum("trc,trd->tcd", comb, x)


def q8_matvec(q, d, h):
    w = (q.view(EMBD, SHARED // 32, 32).float() * d.float().unsqueeze(-1)).view(EMBD, SHARED)
    return h @ w.t()


def hc_pre(x, p):
    mix = norm_mix(x, p["w32"])
    pre, post, comb = split(mix, p["scale"], p["base"])
    u = collapse(x, pre)
    return rms_norm(u, p["norm_weight"]), post, comb


# ---- benchmark ----------------------------------------------------------------------------

def make_set(t, gen):
    dev = "cuda"
    f = dict(device=dev, dtype=torch.float32)
    s = {
        "x": torch.randn(t, N_HC, EMBD, generator=gen, **f),
        "attn_out": torch.randn(t, EMBD, generator=gen, **f),
        "routed": torch.randn(t, EMBD, generator=gen, **f),
        "hidden": torch.randn(t, SHARED, generator=gen, **f),
        "q": torch.randint(-127, 128, (EMBD, SHARED), generator=gen, device=dev,
                           dtype=torch.int8),
        "d": (torch.rand(EMBD, SHARED // 32, generator=gen, device=dev) * 0.01).half(),
    }
    w16 = (torch.randn(MIX, N_HC * EMBD, generator=gen, **f) * 0.02).half()
    for name in ("attn", "ffn"):
        s[name] = {
            "w32": w16.float(),
            "scale": torch.full((3,), 0.5, **f),
            "base": torch.randn(MIX, generator=gen, **f) * 0.5,
            "norm_weight": torch.randn(EMBD, generator=gen, **f),
        }
    s["mix"] = norm_mix(s["x"], s["attn"]["w32"])
    s["pre"], s["post"], s["comb"] = split(s["mix"], s["attn"]["scale"], s["attn"]["base"])
    return s


def ops():
    def layer(s):
        normed, post, comb = hc_pre(s["x"], s["attn"])
        x_mid = expand(s["attn_out"], s["x"], post, comb)
        normed_f, post_f, comb_f = hc_pre(x_mid, s["ffn"])
        shared = q8_matvec(s["q"], s["d"], s["hidden"])
        return expand(s["routed"], x_mid, post_f, comb_f, add=shared)

    return [
        ("norm_mix", lambda s: norm_mix(s["x"], s["attn"]["w32"])),
        ("split", lambda s: split(s["mix"], s["attn"]["scale"], s["attn"]["base"])),
        ("collapse", lambda s: collapse(s["x"], s["pre"])),
        ("hc_pre", lambda s: hc_pre(s["x"], s["attn"])),
        ("expand", lambda s: expand(s["attn_out"], s["x"], s["post"], s["comb"])),
        ("expand + add", lambda s: expand(s["attn_out"], s["x"], s["post"], s["comb"],
                                          add=s["routed"])),
        ("q8_matvec 2048->4096", lambda s: q8_matvec(s["q"], s["d"], s["hidden"])),
        ("q8 shared + expand (FFN out)", lambda s: expand(
            s["routed"], s["x"], s["post"], s["comb"],
            add=q8_matvec(s["q"], s["d"], s["hidden"]))),
        ("layer (pre, expand, pre, q8 shared + expand)", layer),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write results as JSON to this path")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # keep the f32 math of the spec
    reps, calls = (10, 4) if args.quick else (30, 8)
    gen = torch.Generator(device="cuda").manual_seed(1234)
    results = []
    for t in (1, 32, 512):
        set_bytes = t * N_HC * EMBD * 4 * 2 + MIX * N_HC * EMBD * 4 + EMBD * SHARED * 3
        n_sets = max(1, min(MAX_ROTATION, -(-ROTATION_BYTES // set_bytes)))
        sets = [make_set(t, gen) for _ in range(n_sets)]
        for name, fn in ops():
            launch = lambda i, fn=fn: fn(sets[i % n_sets])
            counter = iter(range(1 << 30))
            eager = median_event_us(lambda: launch(next(counter)), 5, reps)
            graph = median_graph_us(launch, calls, reps)
            print(f"T {t:4d}  {name:<46} eager {eager:9.2f} us  graph {graph:9.2f} us",
                  flush=True)
            results.append({"op": name, "T": t, "eager_us": eager, "graph_us": graph,
                            "rotation_sets": n_sets})
        del sets
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "hc_torch", "torch": torch.__version__,
                       "device": torch.cuda.get_device_name(), "embd": EMBD, "n_hc": N_HC,
                       "mix_width": MIX, "shared_width": SHARED, "results": results}, f,
                      indent=2)


if __name__ == "__main__":
    main()
