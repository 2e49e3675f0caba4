#!/usr/bin/env python3
"""The K × V format trade-off: bytes per token, attention error and decode time, with
FlashInfer's F16 and FP8 KV beside our pairs.

    report_formats.py [--ours attention_bench.json] [--flashinfer flashinfer_peer.json]
                      [--sdpa sdpa_peer.json] [--fidelity FILE ...] --out DIR

Writes DIR/formats_report.md and DIR/formats_tradeoff.png (the plot is skipped, with a note,
when matplotlib is missing). Every input is optional and every table takes what is there: a
pair or shape nobody measured shows "–".

- Bytes per token and KV head, K side plus V side (SPEC §1.5, §1.6): F16 2·D, FP8 D + 4 (a
  scale per row), TQ b bits D·b/8 codes + 4 per norm (one norm at D 256, two at D 512);
  FlashInfer's FP8 has one scale per tensor (D per side).
- Fidelity: attention output against exact attention on the CLI main job's data (a sliding
  D 256 layer and a global D 512 layer), read from the CLI's `--json` output (one main-job
  object, per V format for its K format) or from flat rows {k_format, v_format, layer,
  cosine_mean, cosine_min, max_rel_err}; FlashInfer's rows come from flashinfer_peer.py
  --fidelity (its kernels on that data, and the emulation) or kv_fidelity.py (emulation).
- Time: the better of eager and graph replay, per benchmark shape, from attention_bench's
  decode rows (K and V format per row), the FlashInfer peer (its best over tensor-core
  setting and page size, and its best at page 16) and, for D 512's target, PyTorch SDPA.
"""
import argparse
import json
import math
import os
import sys

K_FORMATS = ["f16", "fp8", "tq4", "tq8"]
V_FORMATS = ["f16", "fp8", "tq3", "tq4", "tq5", "tq6", "tq8"]
PAIRS = [(k, v) for k in K_FORMATS for v in V_FORMATS]
TQ_BITS = {"tq3": 3, "tq4": 4, "tq5": 5, "tq6": 6, "tq8": 8}
LAYER_HEAD_DIM = {"sliding": 256, "global": 512}  # the main job's layers (decode_simulation)
FLASHINFER_KV = ["f16", "fp8"]
TARGET_TOKENS = 32768  # issue 16's D 256 targets hold at shapes with ≥ 32K tokens in the batch


def side_bytes(fmt, head_dim, per_tensor_scale=False):
    """Bytes one K or V row of `fmt` takes per token and KV head, scales and norms included."""
    if fmt == "f16":
        return 2 * head_dim
    if fmt == "fp8":
        return head_dim + (0 if per_tensor_scale else 4)
    if fmt in TQ_BITS:
        return head_dim * TQ_BITS[fmt] // 8 + 4 * (head_dim // 256)
    raise ValueError(f"unknown row format {fmt!r}")


def pair_bytes(k_format, v_format, head_dim):
    return side_bytes(k_format, head_dim) + side_bytes(v_format, head_dim)


def flashinfer_bytes(kv, head_dim):
    return 2 * side_bytes(kv, head_dim, per_tensor_scale=True)


# ---- Inputs ----

def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fidelity_rows(document):
    """Flat fidelity rows {system, method, k_format, v_format, layer, cosine_mean, cosine_min,
    max_rel_err} from any of the accepted documents (see the module's docstring)."""
    if document is None:
        return []
    if isinstance(document, dict) and "formats" in document:  # the CLI main job's --json
        rows = []
        for entry in document["formats"]:
            for layer in entry.get("layers", []):
                rows.append({"k_format": entry.get("k_format", document.get("k_format", "f16")),
                             "v_format": entry["v_format"], "layer": layer["name"],
                             **{key: layer[key] for key in ("cosine_mean", "cosine_min")},
                             "max_rel_err": layer["max_relative_error"]})
        document = rows
    elif isinstance(document, dict):
        document = document.get("rows", document.get("fidelity", []))
    rows = []
    for row in document:
        if "cosine_mean" not in row:
            continue  # a variant that did not run
        rows.append({"system": row.get("system", "turbodecode"),
                     "method": row.get("method", "measured"), "k_format": row["k_format"],
                     "v_format": row["v_format"], "layer": row["layer"],
                     "cosine_mean": row["cosine_mean"], "cosine_min": row["cosine_min"],
                     "max_rel_err": row.get("max_rel_err", row.get("max_relative_error"))})
    return rows


def fidelity_index(rows):
    """(system, k, v, layer) -> the row to show: measured before emulated, then the first."""
    index = {}
    for row in rows:
        key = (row["system"], row["k_format"], row["v_format"], row["layer"])
        if key not in index or (index[key]["method"] != "measured" and
                                row["method"] == "measured"):
            index[key] = row
    return index


def geometry(row):
    """A decode shape without its formats: (n_heads, n_kv_heads, D, B, max L, mixed)."""
    return (row["n_heads"], row["n_kv_heads"], row["head_dim"], row["batch"], row["max_length"],
            bool(row.get("mixed", False)))


def geometry_label(g):
    heads, kv_heads, d, batch, length, mixed = g
    return f"{heads}/{kv_heads} D{d} " + (f"mixed B={batch} L<={length}" if mixed
                                          else f"B={batch} L={length}")


def best_us(row):
    times = [row[k] for k in ("eager_us", "graph_us") if row.get(k) is not None]
    return min(times) if times else None


def our_times(ours):
    """(geometry, k, v) -> µs of attention_bench's decode rows of one query token per sequence
    (rows with errors left out; a paged row, if any, counts under its page size: v_format
    'tq8@p16')."""
    times = {}
    for row in (ours or {}).get("decode", []):
        if "error" in row or best_us(row) is None or row.get("query_tokens", 1) != 1:
            continue
        v = row["v_format"] + (f"@p{row['page_size']}" if row.get("page_size") else "")
        times[(geometry(row), row.get("k_format", "f16"), v)] = best_us(row)
    return times


def flashinfer_times(peer):
    """(geometry, kv, 'best' | 'page16') -> the peer's run (µs, tensor cores, page size)."""
    times = {}
    for result in (peer or {}).get("results", []):
        for which, field in (("best", "best"), ("page16", "best_page16")):
            for kv, run in (result.get(field) or {}).items():
                times[(geometry(result), kv, which)] = run
    return times


def sdpa_times(sdpa):
    """geometry -> the best SDPA µs (F16 K/V); sdpa_peer repeats a geometry per format."""
    times = {}
    for result in (sdpa or {}).get("results", []):
        if result.get("best"):
            g = geometry(result)
            times[g] = min(times.get(g, math.inf), result["best"]["best_us"])
    return times


def v_order(v):
    """V formats in V_FORMATS order, a paged variant ('tq8@p16') after its contiguous one."""
    base = v.split("@")[0]
    return (V_FORMATS.index(base) if base in V_FORMATS else len(V_FORMATS), v)


# ---- Tables ----

def cell(value, fmt):
    return "–" if value is None else format(value, fmt)


def fidelity_cells(index, system, k, v, layer):
    row = index.get((system, k, v, layer))
    if row is None:
        return ["–", "–", "–"]
    mark = "" if row["method"] == "measured" else " (em.)"
    return [f"{1 - row['cosine_mean']:.2e}{mark}", f"{1 - row['cosine_min']:.2e}",
            f"{row['max_rel_err']:.2e}"]


def bytes_table(index):
    lines = ["| K | V | B/token/KV head D256 | D512 | vs F16 | sliding 1−cos mean | 1−cos min | "
             "max rel err | global 1−cos mean | 1−cos min | max rel err |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    entries = [("turbodecode", k, v, pair_bytes(k, v, 256), pair_bytes(k, v, 512))
               for k, v in PAIRS]
    entries += [("FlashInfer", kv, kv, flashinfer_bytes(kv, 256), flashinfer_bytes(kv, 512))
                for kv in FLASHINFER_KV]
    for system, k, v, b256, b512 in entries:
        name = f"| {k} | {v} " if system == "turbodecode" else f"| FlashInfer | {k} KV "
        cells = [str(b256), str(b512), f"{100 * b256 / pair_bytes('f16', 'f16', 256):.0f}%"]
        for layer in LAYER_HEAD_DIM:
            cells += fidelity_cells(index, system, k, v, layer)
        lines.append(name + "| " + " | ".join(cells) + " |")
    return lines


def time_table(head_dim, ours, peer, sdpa):
    geometries = sorted({g for g, _, _ in ours if g[2] == head_dim} |
                        {g for g, _, _ in peer if g[2] == head_dim},
                        key=lambda g: (g[5], g[3] * g[4], g[3]))
    if not geometries:
        return [f"No D {head_dim} shape was measured."]
    lines = ["| K | V | " + " | ".join(geometry_label(g).split(" ", 2)[2] for g in geometries)
             + " |", "|---|---|" + "---:|" * len(geometries)]
    vs = sorted({v for _, _, v in ours}, key=v_order)
    for k in K_FORMATS:
        for v in vs:
            if any((g, k, v) in ours for g in geometries):
                lines.append(f"| {k} | {v} | " + " | ".join(
                    cell(ours.get((g, k, v)), ".1f") for g in geometries) + " |")
    for kv in FLASHINFER_KV:
        for which in ("best", "page16"):
            runs = [peer.get((g, kv, which)) for g in geometries]
            if any(runs):
                label = "best" if which == "best" else "page 16"
                lines.append(f"| FlashInfer {kv} | {label} | " + " | ".join(
                    "–" if r is None else
                    f"{r['best_us']:.1f} (tc{int(r['tensor_cores'])}, p{r['page_size']})"
                    for r in runs) + " |")
    if any(g in sdpa for g in geometries):
        lines.append("| SDPA f16 | best | " + " | ".join(cell(sdpa.get(g), ".1f")
                                                     for g in geometries) + " |")
    return lines


def target_lines(ours, peer, sdpa, index):
    """Issue 16's speed targets against FlashInfer FP8, where both were measured."""
    lines = []
    fp8_error = index.get(("FlashInfer", "fp8", "fp8", "sliding"))
    for v, bound in (("tq4", 0.75), ("tq6", 0.90)):
        for (g, k, pair_v), us in sorted(ours.items()):
            if k != "fp8" or pair_v != v or g[2] != 256 or g[3] * g[4] < TARGET_TOKENS:
                continue
            run = peer.get((g, "fp8", "best"))
            if run is None:
                continue
            ratio = us / run["best_us"]
            verdict = "met" if ratio <= bound else "not met"
            lines.append(f"- K fp8 + V {v}, {geometry_label(g)}: {us:.1f} µs = {ratio:.2f}× "
                         f"FlashInfer FP8 ({run['best_us']:.1f} µs); target ≤ {bound}: {verdict}")
        ours_error = index.get(("turbodecode", "fp8", v, "sliding"))
        if v == "tq6" and ours_error and fp8_error:
            smaller = ours_error["max_rel_err"] < fp8_error["max_rel_err"]
            lines.append(f"- K fp8 + V tq6 max rel error {ours_error['max_rel_err']:.2e} vs "
                         f"FlashInfer FP8 {fp8_error['max_rel_err']:.2e} (sliding layer): "
                         f"{'smaller' if smaller else 'not smaller'}")
    for (g, k, v), us in sorted(ours.items()):
        if g[2] != 512:
            continue
        peers = [r["best_us"] for kv in FLASHINFER_KV if (r := peer.get((g, kv, "best")))]
        peers += [sdpa[g]] if g in sdpa else []
        if peers:
            ratio = us / min(peers)
            lines.append(f"- D512 K {k} V {v}, {geometry_label(g)}: {ratio:.2f}× the best "
                         f"peer's time ({min(peers):.1f} µs); target ≤ 0.5: "
                         f"{'met' if ratio <= 0.5 else 'not met'}")
    return lines or ["No shape has both our pair and a peer measured."]


# ---- Plot ----

def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def tradeoff_points(ours, peer, index):
    """Per head-dim family (D 256: the sliding layer's error; D 512: the global layer's):
    (label, head dim, µs geometric mean over the family's uniform shapes with ≥ 32K tokens,
    max rel error, how many shapes the mean took)."""
    def in_family(g, head_dim):
        return g[2] == head_dim and not g[5] and g[3] * g[4] >= TARGET_TOKENS

    points = []
    for layer, head_dim in LAYER_HEAD_DIM.items():
        for k, v in PAIRS:
            times = [us for (g, pk, pv), us in ours.items()
                     if pk == k and pv == v and in_family(g, head_dim)]
            error = index.get(("turbodecode", k, v, layer))
            if times and error:
                points.append((f"K {k} V {v}", head_dim, geomean(times),
                               error["max_rel_err"], len(times)))
        for kv in FLASHINFER_KV:
            times = [r["best_us"] for (g, pkv, which), r in peer.items()
                     if pkv == kv and which == "best" and in_family(g, head_dim)]
            error = index.get(("FlashInfer", kv, kv, layer))
            if times and error:
                points.append((f"FlashInfer {kv}", head_dim, geomean(times),
                               error["max_rel_err"], len(times)))
    return points


def plot(points, path, device):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib is not installed: no plot"
    if not points:
        return "no pair has both a time and a fidelity yet: no plot"
    fig, axes = plt.subplots(1, 2, figsize=(13, 6))
    colours = dict(zip(V_FORMATS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    markers = dict(zip(K_FORMATS, ["o", "s", "^", "D"]))
    for ax, head_dim in zip(axes, LAYER_HEAD_DIM.values()):
        for label, d, us, error, count in points:
            if d != head_dim:
                continue
            if label.startswith("FlashInfer"):
                ax.plot(us, error, "*", color="black", markersize=14)
            else:
                k, v = label.split()[1], label.split()[3]
                ax.plot(us, error, markers[k], color=colours[v], markersize=8)
            ax.annotate(f"{label} ({count})", (us, error), fontsize=6, xytext=(4, 3),
                        textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("µs per decode call: geometric mean over the shapes with ≥ 32K tokens "
                      "(how many in brackets)", fontsize=8)
        ax.set_ylabel("max relative error of the attention output")
        ax.set_title(f"D {head_dim} ({'sliding' if head_dim == 256 else 'global'} layer error)")
        ax.grid(True, which="both", linewidth=0.3)
    handles = [plt.Line2D([], [], marker=m, linestyle="", color="grey", label=f"K {k}")
               for k, m in markers.items()]
    handles += [plt.Line2D([], [], marker="o", linestyle="", color=c, label=f"V {v}")
                for v, c in colours.items()]
    handles.append(plt.Line2D([], [], marker="*", linestyle="", color="black",
                              label="FlashInfer", markersize=12))
    fig.legend(handles=handles, loc="lower center", ncol=12, fontsize=7)
    fig.suptitle(f"KV formats: error vs decode time{', ' + device if device else ''}")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    return None


# ---- Main ----

def report_lines(ours_doc, peer_doc, sdpa_doc, fidelity):
    index = fidelity_index(fidelity)
    ours, peer, sdpa = our_times(ours_doc), flashinfer_times(peer_doc), sdpa_times(sdpa_doc)
    device = (ours_doc or {}).get("device", {}).get("name") or (peer_doc or {}).get("device")
    lines = [f"# KV formats: bytes, fidelity and speed{' on ' + device if device else ''}", ""]
    if peer_doc:
        lines += [f"FlashInfer {peer_doc.get('flashinfer', '?')} "
                  f"(`BatchDecodeWithPagedKVCacheWrapper`, {peer_doc.get('layout', 'NHD')}, "
                  "q/out f16, FP8 with per-tensor k_scale, v_scale left to the caller), same "
                  "run, graph replay, caches cycled beyond L2.", ""]
    lines += ["## Bytes per token and KV head, and attention error against exact attention",
              "", "Error on the CLI main job's data (sliding: D 256, 16/8, window 1024; "
              "global: D 512, 16/2); (em.) marks an emulated figure.", ""]
    lines += bytes_table(index) + [""]
    for head_dim in (256, 512):
        lines += [f"## Decode µs, D {head_dim} (better of eager and graph replay)", ""]
        lines += time_table(head_dim, ours, peer, sdpa) + [""]
    unsupported = (peer_doc or {}).get("unsupported") or {}
    if unsupported:
        lines += ["FlashInfer variants that did not build or plan:", ""]
        lines += [f"- {key}: {error.splitlines()[0][:200]}" for key, error in
                  sorted(unsupported.items())] + [""]
    lines += ["## Issue 16 targets against the peers", ""]
    lines += target_lines(ours, peer, sdpa, index)
    return lines, tradeoff_points(ours, peer, index), device


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", help="attention_bench --json output")
    parser.add_argument("--flashinfer", help="flashinfer_peer.py --json output")
    parser.add_argument("--sdpa", help="sdpa_peer.py --json output")
    parser.add_argument("--fidelity", action="append", default=[],
                        help="fidelity JSON (the CLI's --json, or rows); repeatable")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ours_doc, peer_doc, sdpa_doc = load(args.ours), load(args.flashinfer), load(args.sdpa)
    fidelity = fidelity_rows(peer_doc.get("fidelity", []) if peer_doc else [])
    for path in args.fidelity:
        fidelity += fidelity_rows(load(path))
    lines, points, device = report_lines(ours_doc, peer_doc, sdpa_doc, fidelity)
    os.makedirs(args.out, exist_ok=True)
    note = plot(points, os.path.join(args.out, "formats_tradeoff.png"), device)
    lines += ["", "formats_tradeoff.png: max relative error against µs (log-log), one point "
              "per pair and head-dim family (µs: geometric mean over the family's uniform "
              "shapes with ≥ 32K tokens, how many in brackets)."]
    if note:
        lines.append(note)
    with open(os.path.join(args.out, "formats_report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
