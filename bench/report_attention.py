#!/usr/bin/env python3
"""Merges attention_bench and sdpa_peer JSON into a markdown table and a PNG plot.

    report_attention.py --ours ours.json [--peer peer.json] --out DIR

Writes DIR/attention_report.md and DIR/attention_gbps.png (the plot is skipped, with a note,
when matplotlib is missing). Our time per shape is the better of eager and graph replay, as is
the peer's; the ratio is ours / peer (below 1: we are faster).
"""
import argparse
import json
import os
import sys


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def our_best_us(row):
    return min(row["eager_us"], row["graph_us"])


def peer_by_label(peer):
    if not peer:
        return {}
    return {r["label"]: r.get("best") for r in peer["results"]}


def decode_table(ours, peers):
    lines = [
        "| shape | V | eager µs | graph µs | GB/s | % read-stream | read floor µs "
        "| split floor µs | peer µs | peer backend | ours/peer |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in ours["decode"]:
        if "error" in row:
            lines.append(f"| {row.get('label', '?')} | | error: {row['error']} | | | | | | | | |")
            continue
        best = our_best_us(row)
        gbps = row["bytes"] / (best * 1e3)
        peer = peers.get(row["label"])
        peer_cells = "| – | none ran | –" if row["label"] in peers else "| – | not run | –"
        if peer:
            peer_cells = (f"| {peer['best_us']:.1f} | {peer['backend']} ({peer['gqa']}) "
                          f"| {best / peer['best_us']:.2f}")
        flag = "" if row.get("non_finite_outputs", 0) == 0 else " ⚠ NaN"
        lines.append(f"| {row['label']}{flag} | {row['v_format']} | {row['eager_us']:.1f} "
                     f"| {row['graph_us']:.1f} | {gbps:.0f} | {row['pct_read_stream']:.1f} "
                     f"| {row.get('read_stream_same_bytes_graph_us', float('nan')):.1f} "
                     f"| {row.get('split_read_floor_graph_us', float('nan')):.1f} "
                     f"{peer_cells} |")
    return lines


def append_table(ours, read_gbps):
    lines = [
        "| append (K f16) | tokens | input | bytes | eager µs | graph µs | GB/s | % read-stream "
        "| read-stream kernel on as many bytes, graph µs | row copy floor, graph µs |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ours.get("append", []):
        if "error" in row:
            lines.append(f"| D{row.get('head_dim', '?')} | | | | error: {row['error']} | | | | | |")
            continue
        paged = f", pages of {row['page_size']}" if row.get("page_size", 0) > 0 else ""
        lines.append(f"| D{row['head_dim']} {row['n_kv_heads']} KV heads, "
                     f"V {row['v_format']}{paged} | {row['tokens']} | {row['input']} | {row['bytes']} "
                     f"| {row['eager_us']:.1f} | {row['graph_us']:.1f} | {row['graph_gbps']:.0f} "
                     f"| {100 * row['graph_gbps'] / read_gbps:.1f} "
                     f"| {row.get('read_stream_same_bytes_graph_us', float('nan')):.2f} "
                     f"| {row.get('row_copy_floor_graph_us', float('nan')):.2f} |")
    if "launch_floor_graph_us" in ours:
        lines += ["", f"An empty dependent launch takes {ours['launch_floor_graph_us']:.2f} µs per "
                      "call in the same graph setting."]
    return lines


def plot(ours, peers, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    fig, ax = plt.subplots(figsize=(9, 5.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = {1: "o", 8: "s", 32: "^", 64: "D"}
    lines = {}  # (who, D, format) -> {batch: [(L, GB/s)]}
    for row in ours["decode"]:
        if "error" in row or row["mixed"]:
            continue
        gbps = row["bytes"] / (our_best_us(row) * 1e3)
        k_format = row.get("k_format", "f16")
        fmt = row["v_format"] if k_format == "f16" else f"K {k_format} V {row['v_format']}"
        lines.setdefault(("ours", row["head_dim"], fmt), {}).setdefault(
            row["batch"], []).append((row["max_length"], gbps))
        peer = peers.get(row["label"])
        if peer and row["v_format"] == "f16":
            lines.setdefault(("SDPA", row["head_dim"], "f16 K/V"), {}).setdefault(
                row["batch"], []).append((row["max_length"], peer["gbps"]))
    # One colour per (who, D, format); lines join B = 1 over L, markers show the batch.
    for index, (key, batches) in enumerate(sorted(lines.items())):
        who, d, fmt = key
        colour = colours[index % len(colours)]
        style = "--" if who == "SDPA" else "-"
        for batch, points in sorted(batches.items()):
            points.sort()
            xs, ys = zip(*points)
            label = f"{who} D{d} {fmt}" if batch == 1 else None
            ax.plot(xs, ys, style if batch == 1 else "", color=colour,
                    marker=markers.get(batch, "x"), label=label)
    for batch, marker in markers.items():
        ax.plot([], [], marker, color="grey", linestyle="", label=f"B={batch}")
    read = ours["bandwidth"]["read_stream_gbps"]
    ax.axhline(read, color="black", linewidth=0.8, label=f"read-stream {read:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length L (positions per sequence)")
    ax.set_ylabel("GB/s (bytes that must move / time)")
    ax.set_title(f"Decode attention, {ours['device']['name']}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", required=True)
    parser.add_argument("--peer")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ours = load(args.ours)
    if ours is None:
        print(f"report_attention: {args.ours} not found", file=sys.stderr)
        return 1
    peer = load(args.peer)
    peers = peer_by_label(peer)
    os.makedirs(args.out, exist_ok=True)
    bw = ours["bandwidth"]
    dev = ours["device"]
    lines = [
        f"# Decode attention on {dev['name']} ({dev['sm_count']} SMs)",
        "",
        f"Read-stream bandwidth {bw['read_stream_gbps']:.0f} GB/s, copy {bw['copy_gbps']:.0f} GB/s "
        f"(read + write), measured in the same run over {bw['buffer_bytes'] >> 20} MiB.",
        f"Peer: {peer['peer']} (torch {peer['torch']}, F16 K/V)." if peer else "Peer: not run.",
        "",
    ]
    lines += decode_table(ours, peers) + [""] + append_table(ours, bw["read_stream_gbps"]) + [""]
    note = plot(ours, peers, os.path.join(args.out, "attention_gbps.png"))
    if note:
        lines.append(note)
    with open(os.path.join(args.out, "attention_report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
