#!/usr/bin/env python3
"""Per-kernel time of one forward from an ncu --csv run (metric gpu__time_duration.sum).

usage: ncu_breakdown.py profile.csv
The bench runs the forward several times (warm-up, timed replays); this prints the last
complete forward: each kernel once, in launch order, with its duration in microseconds. The
routing kernel is left out: the bench launches it on its own, around the forwards (timed
apart as "route us"), so it does not mark where a forward starts.
"""
import csv
import sys


def kernel_name(full):
    """'void unnamed>::k<16, 1, 2>(unnamed>::Params, ...)' -> 'k<16, 1, 2>': namespaces and
    arguments dropped, template arguments kept (one kernel's instantiations differ by them).
    ncu writes the anonymous namespace as 'unnamed>::'; '<unnamed>::' and
    '(anonymous namespace)::' are taken too."""
    name = full[5:] if full.startswith("void ") else full
    for anonymous in ("(anonymous namespace)::", "<unnamed>::", "unnamed>::"):
        name = name.replace(anonymous, "")
    head, angle, tail = name.split("(")[0].partition("<")
    return head.split("::")[-1] + angle + tail


def main() -> int:
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = kernel_name(r.get("Kernel Name", "?"))
        if name == "route_kernel":
            continue
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
        print(f"  {n:40s} {us:9.1f} us")
    print(f"  {'sum of kernels':40s} {total:9.1f} us ({len(last)} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
