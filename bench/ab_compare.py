#!/usr/bin/env python3
"""Same-run A/B of two builds of a GPU benchmark (attention_bench or hc_bench).

Run on the GPU machine: the two binaries take turns, `--runs` times each, in one run, so
that both see the same card, clocks and bandwidth; then the median CUDA-graph time of every row
is printed per build with the ratio new / old. With --summarize, only the summary is made, from
the JSON files a previous run left in the folder.

  bench/ab_compare.py OLD_BINARY NEW_BINARY OUT_DIR [--runs 3] [-- BENCH_ARGS...]
  bench/ab_compare.py --summarize OUT_DIR
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys


def rows_of(report):
    """(row name, graph µs) for every timed row of one benchmark JSON."""
    if "results" in report:  # hc_bench
        for r in report["results"]:
            yield f"{r['op']}, T = {r['T']}", r["graph_us"]
        return
    for r in report.get("decode", []):  # attention_bench
        if "graph_us" in r:
            yield r["label"], r["graph_us"]
    for r in report.get("append", []):
        if "graph_us" in r:
            paging = f" P{r['page_size']}" if r.get("page_size", 0) > 0 else ""
            name = (f"append D{r['head_dim']} {r['n_kv_heads']}kv V {r['v_format']} "
                    f"in {r['input']} {r['tokens']} tok{paging}")
            yield name, r["graph_us"]


def medians(out_dir, build):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out_dir, f"{build}_*.json"))):
        with open(path) as f:
            for name, us in rows_of(json.load(f)):
                runs.setdefault(name, []).append(us)
    return {name: statistics.median(v) for name, v in runs.items()}, runs


def summarize(out_dir):
    old, old_runs = medians(out_dir, "old")
    new, new_runs = medians(out_dir, "new")
    if not old or not new:
        sys.exit(f"no old_*.json or new_*.json in {out_dir}")
    print(f"| row | old µs | new µs | new / old | runs |")
    print(f"|---|---:|---:|---:|---:|")
    for name in old:
        if name not in new:
            continue
        print(f"| {name} | {old[name]:.2f} | {new[name]:.2f} | {new[name] / old[name]:.3f} | "
              f"{len(old_runs[name])} + {len(new_runs[name])} |")
    with open(os.path.join(out_dir, "ab_medians.json"), "w") as f:
        json.dump({"old": old, "new": new, "old_runs": old_runs, "new_runs": new_runs}, f,
                  indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summarize", metavar="OUT_DIR")
    parser.add_argument("old", nargs="?")
    parser.add_argument("new", nargs="?")
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--runs", type=int, default=3)
    argv = sys.argv[1:]
    bench_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.summarize:
        summarize(args.summarize)
        return
    if not (args.old and args.new and args.out_dir):
        parser.error("OLD_BINARY NEW_BINARY OUT_DIR are required")
    os.makedirs(args.out_dir, exist_ok=True)
    for i in range(1, args.runs + 1):
        for build, binary in (("old", args.old), ("new", args.new)):
            json_path = os.path.join(args.out_dir, f"{build}_{i}.json")
            with open(os.path.join(args.out_dir, f"{build}_{i}.log"), "w") as log:
                subprocess.run([binary, *bench_args, "--json", json_path], stdout=log,
                               stderr=subprocess.STDOUT, check=True)
    summarize(args.out_dir)


if __name__ == "__main__":
    main()
