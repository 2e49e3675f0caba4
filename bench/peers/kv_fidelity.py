#!/usr/bin/env python3
"""Attention fidelity of KV storage formats on the CLI main job's data, by emulation (numpy).

The main job (`turbodecode`, no arguments) measures our formats' decode output against exact
attention on a Gemma-like pair of layers. This module rebuilds the same layers, data and exact
outputs (synthetic_kv.py) and emulates other storage on them: FlashInfer's F16 KV (q, K, V and
the output rounded to f16) and FP8-E4M3 KV with one scale per tensor (the float k_scale /
v_scale its run() takes: K and V divided by amax / 448 of the layer's whole K or V), and our
per-row FP8 (SPEC §1.6) as a cross-check of the CLI. Each yields the CLI's statistics per
layer: mean and min cosine and max relative L2 error over head rows.

    kv_fidelity.py --json emulated.json [--context 8192] [--steps 32] [--seed 20261129]
"""
import argparse
import json
import sys

import numpy as np

from synthetic_kv import SyntheticRows, synthetic_query

E4M3_MAX = 448.0
E4M3_MIN_EXPONENT = -6  # smallest normal exponent; below it the spacing stays 2^-9
E4M3_MANTISSA_BITS = 3


class Layer:
    """One layer of the main job (tools/decode_simulation.cpp, gemma_like_layers)."""

    def __init__(self, name, n_heads, n_kv_heads, head_dim, window):
        self.name, self.n_heads, self.n_kv_heads = name, n_heads, n_kv_heads
        self.head_dim, self.window = head_dim, window  # window 0: every earlier position

    def first_visible(self, position):
        return 0 if self.window == 0 else max(0, position + 1 - self.window)


LAYERS = [Layer("sliding", 16, 8, 256, 1024), Layer("global", 16, 2, 512, 0)]


class LayerData:
    """A layer's rows, its queries at positions context … context + steps − 1, and the exact
    f64 attention of each over the unquantized rows it sees."""

    def __init__(self, layer, index, context, steps, seed):
        layer_seed = (seed + 1000003 * index) % (1 << 64)
        total = context + steps
        self.layer = layer
        self.keys = SyntheticRows(layer.n_kv_heads, layer.head_dim, total, layer_seed)
        self.values = SyntheticRows(layer.n_kv_heads, layer.head_dim, total, layer_seed + 1)
        self.positions = list(range(context, total))
        self.queries = np.stack([synthetic_query(self.keys, layer.n_heads, p, layer_seed + 2)
                                 for p in self.positions])  # [steps, n_heads, D] f32
        self.exact = self.attend_all(self.queries, self.keys.rows, self.values.rows)

    def attend_all(self, queries, k_rows, v_rows, k_scale=1.0):
        """Attention (f64) of each step's query [n_heads, D] over the rows it sees, the logits
        scaled by k_scale / √D; rows [positions, n_kv_heads, D]. All steps in one pass over the
        rows any of them sees, the others masked."""
        layer = self.layer
        steps, group = len(self.positions), layer.n_heads // layer.n_kv_heads
        first = layer.first_visible(self.positions[0])
        seen = np.arange(first, self.positions[-1] + 1)
        visible = np.stack([(seen >= layer.first_visible(p)) & (seen <= p)
                            for p in self.positions])  # [steps, rows]
        k = np.asarray(k_rows[first:seen[-1] + 1], np.float64).transpose(1, 2, 0)  # [h, D, n]
        v = np.asarray(v_rows[first:seen[-1] + 1], np.float64).transpose(1, 0, 2)  # [h, n, D]
        q = np.asarray(queries, np.float64).reshape(steps, layer.n_kv_heads, group, -1)
        q = q.transpose(1, 0, 2, 3).reshape(layer.n_kv_heads, steps * group, -1)
        scores = (q @ k * (k_scale / np.sqrt(layer.head_dim))).reshape(
            layer.n_kv_heads, steps, group, -1)
        scores = np.where(visible[None, :, None, :], scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        out = weights.reshape(layer.n_kv_heads, steps * group, -1) @ v
        out = out.reshape(layer.n_kv_heads, steps, group, layer.head_dim).transpose(1, 0, 2, 3)
        return out.reshape(steps, layer.n_heads, layer.head_dim)


def fidelity(computed, exact):
    """The CLI's statistics over head rows (last axis = D): cosine mean and min, max relative
    L2 error. A non-finite row counts as cosine −1 and infinite error."""
    a = np.asarray(computed, dtype=np.float64).reshape(-1, exact.shape[-1])
    b = np.asarray(exact, dtype=np.float64).reshape(-1, exact.shape[-1])
    dot, a2, b2 = (a * b).sum(-1), (a * a).sum(-1), (b * b).sum(-1)
    error = ((a - b) ** 2).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.where((a2 > 0) | (b2 > 0), dot / np.sqrt(a2 * b2), 1.0)
        relative = np.where(b2 > 0, np.sqrt(error / b2), np.where(error > 0, np.inf, 0.0))
    bad = ~np.isfinite(error)
    cosine, relative = np.where(bad, -1.0, cosine), np.where(bad, np.inf, relative)
    return {"cosine_mean": float(cosine.mean()), "cosine_min": float(cosine.min()),
            "max_rel_err": float(relative.max())}


def round_f16(x):
    return np.asarray(x).astype(np.float16).astype(np.float64)


def round_e4m3(x):
    """Nearest E4M3 value (OCP, as torch.float8_e4m3fn; ties to even), saturated to ±448."""
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.abs(x)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    spacing = np.exp2(np.maximum(exponent, E4M3_MIN_EXPONENT) - E4M3_MANTISSA_BITS)
    return np.sign(x) * np.minimum(np.round(magnitude / spacing) * spacing, E4M3_MAX)


def tensor_scale(rows):
    """FlashInfer's k_scale / v_scale as calibrated on the whole tensor: amax / 448."""
    return float(np.abs(rows).max()) / E4M3_MAX


def fp8_per_tensor(rows):
    """(codes as f64, scale): rows stored as FP8 with one scale for the tensor."""
    scale = tensor_scale(rows)
    return round_e4m3(rows / scale), scale


def fp8_per_row(rows):
    """Rows stored as SPEC §1.6 FP8 (a f32 scale amax / 448 per head row), decoded."""
    rows = rows.astype(np.float32)
    scale = np.abs(rows).max(axis=-1, keepdims=True) / np.float32(E4M3_MAX)
    safe = np.where(scale > 0, scale, np.float32(1.0))
    return round_e4m3(rows / safe).astype(np.float32) * scale


def flashinfer_outputs(data, kv_format):
    """FlashInfer's decode output on the layer, emulated: q, K, V in f16 (`f16`) or K, V as
    FP8 with per-tensor scales (`fp8`: k_scale folds into the logits scale, v_scale multiplies
    the f16 output afterwards, as its run() does)."""
    query = round_f16(data.queries)
    if kv_format == "f16":
        return round_f16(data.attend_all(query, round_f16(data.keys.rows),
                                         round_f16(data.values.rows)))
    (k, k_scale), (v, v_scale) = fp8_per_tensor(data.keys.rows), fp8_per_tensor(data.values.rows)
    return round_f16(round_f16(data.attend_all(query, k, v, k_scale)) * v_scale)


def turbodecode_outputs(data, k_format, v_format):
    """Our f16 / fp8 (per-row) storage, emulated: q stays f32, the output f64."""
    store = {"f16": round_f16, "fp8": fp8_per_row}
    return data.attend_all(data.queries, store[k_format](data.keys.rows),
                           store[v_format](data.values.rows))


def emulated_rows(datas):
    """Fidelity rows (the report's schema) of every emulated storage on every layer."""
    rows = []
    for data in datas:
        for kv_format in ("f16", "fp8"):
            stats = fidelity(flashinfer_outputs(data, kv_format), data.exact)
            rows.append({"system": "FlashInfer", "method": "emulated", "k_format": kv_format,
                         "v_format": kv_format, "layer": data.layer.name, **stats})
        for k_format in ("f16", "fp8"):
            for v_format in ("f16", "fp8"):
                stats = fidelity(turbodecode_outputs(data, k_format, v_format), data.exact)
                rows.append({"system": "turbodecode", "method": "emulated", "k_format": k_format,
                             "v_format": v_format, "layer": data.layer.name, **stats})
    return rows


def layer_datas(context, steps, seed):
    return [LayerData(layer, i, context, steps, seed) for i, layer in enumerate(LAYERS)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where to write the rows")
    parser.add_argument("--context", type=int, default=8192, help="as the main job's --context")
    parser.add_argument("--steps", type=int, default=32, help="as the main job's --steps")
    parser.add_argument("--seed", type=int, default=20261129, help="as the CLI's --seed")
    args = parser.parse_args()
    rows = emulated_rows(layer_datas(args.context, args.steps, args.seed))
    for row in rows:
        print(f"{row['system']:<12} {row['method']:<9} K {row['k_format']:<4} V "
              f"{row['v_format']:<4} {row['layer']:<8} cos {row['cosine_mean']:.9f} "
              f"min {row['cosine_min']:.9f} max rel {row['max_rel_err']:.3e}")
    with open(args.json, "w") as f:
        json.dump({"context": args.context, "steps": args.steps, "seed": args.seed,
                   "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
