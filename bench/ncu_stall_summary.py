#!/usr/bin/env python3
"""Warp-stall summary of each profiled kernel from Nsight Compute's per-instruction SASS table.

  ncu ... --set full -o report ./attention_bench --only "LABEL"
  ncu -i report.ncu-rep --page source --csv --print-source sass > sass.csv
  bench/ncu_stall_summary.py sass.csv [--top 25] [--split ADDRESS_SUFFIX ...]

Prints, for each kernel of the export (under its name when there are several), the stall
reasons' shares of all samples, the instructions with the most samples (with their two main
reasons) and, for each --split address (the last hex digits of an instruction's address, as
printed in the top list), the share of samples before it: e.g. the instructions before a
kernel's tile loop.
"""
import argparse
import collections
import csv


def tables(rows):
    """(kernel name, header row, data rows) for each profiled kernel in the export: Nsight
    Compute writes one "Kernel Name" line and one table per kernel."""
    found = []
    name = "?"
    for i, r in enumerate(rows):
        if r and r[0] == "Kernel Name":
            name = r[1] if len(r) > 1 else "?"
        elif r and r[0] == "Address":
            found.append((name, i))
    result = []
    for k, (name, header) in enumerate(found):
        end = found[k + 1][1] if k + 1 < len(found) else len(rows)
        names = rows[header]
        data = [r for r in rows[header + 1:end] if len(r) >= len(names)]
        result.append((name, names, data))
    return result


def summarize(names, data, top, splits):
    column = {name: i for i, name in enumerate(names)}
    samples = column["Warp Stall Sampling (All Samples)"]
    reasons = [n for n in names if n.startswith("stall_") and "Not Issued" not in n]
    count = lambda r, c: int(r[column[c]] or 0)
    totals = collections.Counter()
    for r in data:
        for reason in reasons:
            totals[reason] += count(r, reason)
    all_samples = sum(int(r[samples] or 0) for r in data)
    print(f"{all_samples} samples, {len(data)} instructions")
    for reason, n in totals.most_common(12):
        print(f"  {reason:28s} {100 * n / max(all_samples, 1):5.1f}%")
    for suffix in splits:
        before = 0
        for r in data:
            if r[0].endswith(suffix):
                break
            before += int(r[samples] or 0)
        print(f"before {suffix}: {100 * before / max(all_samples, 1):.1f}% of the samples")
    print("top instructions (address, SASS, samples, main reasons):")
    for r in sorted(data, key=lambda r: -int(r[samples] or 0))[:top]:
        main_reasons = sorted(((count(r, c), c) for c in reasons), reverse=True)[:2]
        print(f"  {r[0][-5:]} {r[1].strip()[:58]:58s} {r[samples]:>6} {main_reasons}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--split", nargs="*", default=[])
    args = parser.parse_args()
    with open(args.csv) as f:
        rows = list(csv.reader(f))
    found = tables(rows)
    for name, names, data in found:
        if len(found) > 1:
            print(f"== {name}")
        summarize(names, data, args.top, args.split)


if __name__ == "__main__":
    main()
