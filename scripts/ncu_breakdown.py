#!/usr/bin/env python3
"""Per-kernel time of one forward from an ncu --csv run (metric gpu__time_duration.sum).

usage: ncu_breakdown.py profile.csv
The bench runs the forward several times (warm-up, timed replays); this prints the last
complete forward: each kernel once, in launch order, with its duration in microseconds.
"""
import csv
import sys


def main() -> int:
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r.get("Kernel Name", "?").split("(")[0].split("<")[0].split("::")[-1]
        rows.append((name, float(r["Metric Value"].replace(",", "")) / 1e3))
    if not rows:
        print("no kernels in", sys.argv[1])
        return 1
    # one forward = the run of kernels up to the first repeat of the first kernel's name
    first = rows[0][0]
    starts = [i for i, (n, _) in enumerate(rows) if n == first]
    last = rows[starts[-2]:starts[-1]] if len(starts) >= 2 else rows
    total = sum(us for _, us in last)
    for n, us in last:
        print(f"  {n:32s} {us:9.1f} us")
    print(f"  {'sum of kernels':32s} {total:9.1f} us ({len(last)} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
