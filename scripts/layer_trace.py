#!/usr/bin/env python3
"""Summarizes the one-kernel layer's stamps (FP4MOE_LAYER_TRACE=path, decode_layer.cu).

    python3 scripts/layer_trace.py TRACE...

Each line of a trace is one CTA: 21 clock64 stamps, unit counts and cycle sums, then the same
21 slots' globaltimer.
Prints, per event, the globaltimer offset from the first CTA's start (min / median / max over
the CTAs, µs), and the median SM-clock time since the CTA's own start (µs at --mhz).
"""
import argparse
import statistics

EVENTS = ["start", "slots", "groups", "issue1", "issued1", "issuedAhead", "landed", "gemm1",
          "barrier1", "hLoaded", "gemm2", "barrier2", "end"]
SUMS = ["wait1", "wait2", "meet", "epilogue", "free", "issue"]
UNITS1, UNITS2, SUMS0, N = 13, 14, 15, 21


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--mhz", type=float, default=1980.0)
    a = ap.parse_args()
    for path in a.traces:
        rows = [[int(v) for v in line.split()] for line in open(path) if line.strip()]
        rows = [r for r in rows if len(r) == 2 * N and r[N] != 0]
        if not rows:
            print(f"{path}: no stamps")
            continue
        t0 = min(r[N] for r in rows)
        u1 = [r[UNITS1] for r in rows]
        u2 = [r[UNITS2] for r in rows]
        print(f"== {path}: {len(rows)} CTAs, GEMM 1 units {min(u1)}-{max(u1)}, GEMM 2 units {min(u2)}-{max(u2)}")
        print(f"{'event':>12} {'global min':>10} {'median':>8} {'max':>8} {'clock med':>9} {'clock max':>9}")
        order = sorted(range(len(EVENTS)), key=lambda i: statistics.median(r[N + i] for r in rows))
        for i in order:
            name = EVENTS[i]
            g = [(r[N + i] - t0) / 1000 for r in rows if r[N + i] >= t0]
            c = [(r[i] - r[0]) / a.mhz for r in rows if r[i] >= r[0] and r[i] != 0]
            if not g:
                continue
            print(f"{name:>12} {min(g):10.2f} {statistics.median(g):8.2f} {max(g):8.2f}"
                  f" {statistics.median(c) if c else float('nan'):9.2f} {max(c) if c else float('nan'):9.2f}")
        print("cycles summed over the kernel (us): " + ", ".join(
            f"{name} {statistics.median(r[SUMS0 + j] for r in rows) / a.mhz:.2f} (max {max(r[SUMS0 + j] for r in rows) / a.mhz:.2f})"
            for j, name in enumerate(SUMS)))


if __name__ == "__main__":
    main()
