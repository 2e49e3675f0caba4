#!/usr/bin/env python3
"""Warp-stall summary of one kernel from Nsight Compute's per-instruction SASS table.

  ncu ... --set full -o report ./attention_bench --only "LABEL"
  ncu -i report.ncu-rep --page source --csv --print-source sass > sass.csv
  bench/ncu_stall_summary.py sass.csv [--top 25] [--split ADDRESS_SUFFIX ...]

Prints the stall reasons' shares of all samples, the instructions with the most samples (with
their two main reasons) and, for each --split address (the last hex digits of an instruction's
address, as printed in the top list), the share of samples before it: e.g. the instructions
before a kernel's tile loop.
"""
import argparse
import collections
import csv


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--split", nargs="*", default=[])
    args = parser.parse_args()
    with open(args.csv) as f:
        rows = list(csv.reader(f))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    names = rows[header]
    column = {name: i for i, name in enumerate(names)}
    data = [r for r in rows[header + 1:] if len(r) >= len(names)]
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
    for suffix in args.split:
        before = 0
        for r in data:
            if r[0].endswith(suffix):
                break
            before += int(r[samples] or 0)
        print(f"before {suffix}: {100 * before / max(all_samples, 1):.1f}% of the samples")
    print("top instructions (address, SASS, samples, main reasons):")
    for r in sorted(data, key=lambda r: -int(r[samples] or 0))[:args.top]:
        main_reasons = sorted(((count(r, c), c) for c in reasons), reverse=True)[:2]
        print(f"  {r[0][-5:]} {r[1].strip()[:58]:58s} {r[samples]:>6} {main_reasons}")


if __name__ == "__main__":
    main()
