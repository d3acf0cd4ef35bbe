#!/usr/bin/env python3
"""Markdown tables of `fp4moe bench --json` results against issue 4's targets.

    python3 scripts/bench_table.py [--copy-tbps RATE] RESULT.json [MORE.json ...]

One table per (preset, quantization): per token count the median forward time, the floor
(max(bytes / copy rate, flops / GEMM rate), ceilings measured in the same run), which term
bounds it, floor/time, the target that applies and whether it is met, and the bf16 cuBLAS
baseline when it ran. Results that carry the sustained GEMM rate (the power cap's; ceilings
gemm_sustained_flops_per_s) add floor/time against the floor with that rate. The regime decides the target: memory-bound (the byte term at least
1.5x the flop term) >= 90%, compute-bound (the reverse) >= 78%, in between >= 70%.
For kimi-k2 W4A16 the Hopper alternatives' times from issue 4 (same GPU model) are shown.

--copy-tbps RATE recomputes every floor with that copy rate (TB/s, read + written) in place of
the run's own: results from before v51 timed cudaMemcpyAsync inside a CUDA graph, where the copy
engines run it at 2.7 TB/s, so their ceiling was a copy kernel's 3.94 where the GPU copies at 4.24.
"""
import json
import sys

TARGETS = {"memory": 0.90, "compute": 0.78, "crossover": 0.70}

# Issue 4: microseconds per kimi-k2 layer on an H200 (vLLM Marlin NVFP4, triton_kernels MXFP4).
KIMI_PEERS = {1: (104, 148), 8: (558, 600), 32: (1687, 1591), 128: (3162, 3061), 512: (4328, 4152),
              2048: (7620, 5642), 8192: (25817, 17375), 16384: (49939, 27219)}


def regime(row, ceil):
    copy, gemm = ceil.get("copy_bytes_per_s"), ceil.get("gemm_flops_per_s")
    if not copy or not gemm:
        return row.get("floor_bound") or "?"
    mem, cmp = row["bytes"] / copy, row["flops"] / gemm
    if mem >= 1.5 * cmp:
        return "memory"
    if cmp >= 1.5 * mem:
        return "compute"
    return "crossover"


def fmt(x, digits=1):
    return "—" if x is None else f"{x:,.{digits}f}"


def rebase(run, ceil):
    """run with floor_us, floor_bound and the floor fractions recomputed at ceil's rates."""
    copy, gemm = ceil["copy_bytes_per_s"], ceil.get("gemm_flops_per_s")
    sustained = ceil.get("gemm_sustained_flops_per_s")
    rows = []
    for row in run.get("rows", []):
        row = dict(row)
        mem = row["bytes"] / copy
        cmp = row["flops"] / gemm if gemm else 0.0
        row["floor_us"] = 1e6 * max(mem, cmp)
        row["floor_bound"] = "memory" if mem >= cmp else "compute"
        us = row.get("forward_us_median")
        row["floor_fraction"] = row["floor_us"] / us if us else None
        if sustained and row.get("floor_fraction_sustained_gemm") is not None and us:
            row["floor_fraction_sustained_gemm"] = 1e6 * max(mem, row["flops"] / sustained) / us
        rows.append(row)
    return dict(run, rows=rows)


def table(run, ceil):
    preset, quant = run.get("preset", "?"), run.get("quant", "?")
    kimi = preset == "kimi-k2" and quant == "w4a16"
    sustained = any(row.get("floor_fraction_sustained_gemm") is not None for row in run.get("rows", []))
    head = "| T | µs | floor µs | bound | floor/time | target | met |"
    sep = "|---|---|---|---|---|---|---|"
    if sustained:
        head += " floor/time, sustained GEMM |"
        sep += "---|"
    head += " bf16 cuBLAS µs | speed-up |"
    sep += "---|---|"
    if kimi:
        head += " Marlin NVFP4 µs | triton MXFP4 µs |"
        sep += "---|---|"
    lines = [f"### {preset} {quant.upper()}", "", head, sep]
    met_all = True
    for row in run.get("rows", []):
        t = row["tokens"]
        reg = regime(row, ceil)
        frac = row.get("floor_fraction")
        target = TARGETS.get(reg)
        met = frac is not None and target is not None and frac >= target
        met_all &= met
        speedup = row.get("speedup_vs_baseline")
        frac_s = "—" if frac is None else f"{100 * frac:.0f}%"
        target_s = "—" if target is None else f"{100 * target:.0f}%"
        speedup_s = "—" if speedup is None else f"{speedup:.2f}x"
        line = (f"| {t} | {fmt(row.get('forward_us_median'))} | {fmt(row.get('floor_us'))} | {reg} | {frac_s} | "
                f"{target_s} | {'yes' if met else 'no'} |")
        if sustained:
            fs = row.get("floor_fraction_sustained_gemm")
            line += f" {'—' if fs is None else f'{100 * fs:.0f}%'} |"
        line += f" {fmt(row.get('baseline_us_median'))} | {speedup_s} |"
        if kimi:
            peers = KIMI_PEERS.get(t)
            line += f" {fmt(peers[0], 0) if peers else '—'} | {fmt(peers[1], 0) if peers else '—'} |"
        lines.append(line)
    lines.append("")
    return lines, met_all


def main(args):
    copy = None
    if args[:1] == ["--copy-tbps"]:
        try:
            copy = float(args[1]) * 1e12
        except (IndexError, ValueError):
            print("--copy-tbps: need a rate in TB/s", file=sys.stderr)
            return 2
        if not copy > 0:
            print(f"--copy-tbps: got {args[1]}, need > 0", file=sys.stderr)
            return 2
        args = args[2:]
    if not args:
        print(__doc__)
        return 2
    for path in args:
        with open(path) as f:
            doc = json.load(f)
        ceil = (doc.get("machine") or {}).get("ceilings") or {}
        gpu = ((doc.get("machine") or {}).get("gpu") or {}).get("name", "?")
        print(f"## {path}: {gpu}, commit {doc.get('git_commit', '?')}, {doc.get('date', '?')}")
        measured = ""
        if copy:
            measured = f" (given; the run measured {fmt((ceil.get('copy_bytes_per_s') or 0) / 1e12, 2)})"
            ceil = dict(ceil, copy_bytes_per_s=copy)
        print(f"ceilings: copy {fmt((ceil.get('copy_bytes_per_s') or 0) / 1e12, 2)} TB/s{measured}, "
              f"bf16 GEMM {fmt((ceil.get('gemm_flops_per_s') or 0) / 1e12, 0)} TFLOP/s"
              + (f" (sustained {fmt(ceil['gemm_sustained_flops_per_s'] / 1e12, 0)})"
                 if ceil.get("gemm_sustained_flops_per_s") else ""))
        print()
        for run in doc.get("runs", []):
            lines, _ = table(rebase(run, ceil) if copy else run, ceil)
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
