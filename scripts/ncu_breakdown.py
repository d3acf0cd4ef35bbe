#!/usr/bin/env python3
"""Per-kernel time of one forward from an ncu --csv run (metric gpu__time_duration.sum).

usage: ncu_breakdown.py profile.csv
The bench runs the forward several times (warm-up, timed replays); this prints the last
complete forward: each kernel once, in launch order, with its duration in microseconds. The
routing kernel is left out: the bench launches it on its own, around the forwards (timed
apart as "route us"), so it does not mark where a forward starts. Any other metrics the run
collected are printed after the duration, one column each, under a short name (the metric's
name without its rollup suffix); a legend of the full names follows the table. A rate of bytes
(a metric with "bytes" in its name, per second: ncu's --print-units base) also gets a column of
the bytes it moved in the launch, in GB: the rate times the launch's duration; a rate of
cycles (a "cycles" metric per second, such as sm__cycles_elapsed.avg.per_second, the SM clock)
likewise the cycles the launch took, in millions. Under the power cap two variants' times may
differ by their clocks alone (v64: a probe with half of B zero ran 7% faster at the same tensor
pipe share, in as many cycles): the cycles tell the work from the clock.
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


def short_name(metric):
    """A column's head: 'smsp__issue_active.avg.pct_of_peak_sustained_active' -> 'issue_active',
    'smsp__inst_executed_pipe_alu.avg...' -> 'pipe_alu', 'sm__pipe_tensor_op_hmma_cycles_active...'
    -> 'pipe_tensor_op_hmma' (at most 16 characters)."""
    base = metric.split(".")[0].split("__", 1)[-1]
    return base.replace("inst_executed_", "").replace("_cycles_active", "")[:16]


def cell(value):
    """A metric's value in 16 characters: one decimal, or 4 significant digits when large."""
    return f"{value:16.1f}" if abs(value) < 1e6 else f"{value:16.4g}"


def main() -> int:
    launches = {}  # launch ID -> (kernel name, {metric: value}), in the file's order
    with open(sys.argv[1], newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        name = kernel_name(r.get("Kernel Name", "?"))
        if name.split("<")[0] in ("route_kernel", "route_kernel_reg") or "Metric Name" not in r:
            continue
        try:
            value = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        launches.setdefault(r.get("ID", str(len(launches))), (name, {}))[1][r["Metric Name"]] = value
    rows = [(n, m) for n, m in launches.values() if "gpu__time_duration.sum" in m]
    if not rows:
        print("no kernels in", sys.argv[1])
        return 1
    extra = sorted({k for _, m in rows for k in m if k != "gpu__time_duration.sum"})
    # Columns derived from rates (metric, head, divisor, legend's unit): the bytes a launch moved
    # in GB, the cycles it took in millions (rate x duration).
    rates = [k for k in extra if k.endswith(".per_second")]
    derived = [(k, short_name(k)[:13] + " GB", 1e9, "") for k in rates if "bytes" in k]
    derived += [(k, short_name(k)[:14] + " M", 1e6, ", millions") for k in rates if "cycles" in k]
    # one forward = the run of kernels up to the first repeat of the first kernel's name
    first = rows[0][0]
    starts = [i for i, (n, _) in enumerate(rows) if n == first]
    last = rows[starts[-2]:starts[-1]] if len(starts) >= 2 else rows
    total = sum(m["gpu__time_duration.sum"] for _, m in last) / 1e3
    width = max([40] + [len(n) for n, _ in last])
    heads = [short_name(k) for k in extra] + [head for _, head, _, _ in derived]
    if extra:
        print(f"  {'kernel':{width}s} {'us':>9s}    " + " ".join(f"{h:>16s}" for h in heads))
    for n, m in last:
        seconds = m["gpu__time_duration.sum"] * 1e-9
        cols = [cell(m[k]) if k in m else f"{'-':>16s}" for k in extra]
        cols += [cell(m[k] * seconds / div) if k in m else f"{'-':>16s}" for k, _, div, _ in derived]
        print(f"  {n:{width}s} {m['gpu__time_duration.sum'] / 1e3:9.1f} us " + " ".join(cols))
    print(f"  {'sum of kernels':{width}s} {total:9.1f} us ({len(last)} kernels)")
    for k in extra:
        print(f"    {short_name(k)}: {k}")
    for k, head, _, unit in derived:
        print(f"    {head}: {k} x gpu__time_duration.sum{unit}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the device scripts read the table through `head`
        sys.stderr.close()
        sys.exit(0)
