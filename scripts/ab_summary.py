#!/usr/bin/env python3
"""The table of an A/B run: bench outputs named <model>[@<tokens>]-<variant>-<rep>.txt in one folder (what the
device calls write: variants alternated, each repeated), as one markdown row per model and token
count with each variant's median (or mean) µs per layer over its repetitions (n) and its change
against the base variant. The median is the default: a process that lands on the power cap's
clock step moves a mean of few processes, not the median.

usage: ab_summary.py DIR [--base VARIANT] [--stat median|mean]

Variant names hold no '-'. The base is --base, else 'main' when present, else the first name in
sorted order. A file with no result rows (a run that failed or was cut short) counts for nothing.

Where the outputs carry the SM clock of their timed replays (the bench's "SM clock N MHz" line
under a row, where NVML is present), a second table gives each variant's clock (the same statistic
over its processes) and its change in clock and in cycles (µs x MHz) against the base: under the
power cap two variants can differ by clock alone, and the cycles say whether a change saved work.
"""
import argparse
import pathlib
import re
import statistics
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\d+(?:\.\d+)?)\s")
CLOCK = re.compile(r"^\s+SM clock (\d+(?:\.\d+)?) MHz")


def read_output(path):
    """({tokens: forward µs}, {tokens: SM MHz}) from one bench output: the rows under the
    'tokens  forward us' header, and the clock line right under a row where there is one."""
    rows, clocks, in_table, last = {}, {}, False, None
    for line in path.read_text(errors="replace").splitlines():
        if line.strip().startswith("tokens") and "forward us" in line:
            in_table = True
            continue
        if not in_table:
            continue
        m = ROW.match(line)
        if m:
            last = int(m.group(1))
            rows[last] = float(m.group(2))
            continue
        c = CLOCK.match(line)
        if c and last is not None:
            clocks[last] = float(c.group(1))
        last = None
    return rows, clocks


def collect(folder):
    """{(model, tokens): {variant: [µs, ...]}}, the variants seen, sorted, and
    {(model, tokens): {variant: [MHz, ...]}} of the outputs with a clock line."""
    runs, variants, clocks = {}, set(), {}
    for path in sorted(pathlib.Path(folder).glob("*.txt")):
        parts = path.stem.rsplit("-", 2)
        if len(parts) != 3:
            continue
        model, variant, _rep = parts
        model = model.split("@")[0]  # MODEL_QUANT@TOKENS (device_lib.sh's ab_point): the tokens are in the rows
        rows, mhz = read_output(path)
        for tokens, us in rows.items():
            runs.setdefault((model, tokens), {}).setdefault(variant, []).append(us)
            variants.add(variant)
        for tokens, f in mhz.items():
            clocks.setdefault((model, tokens), {}).setdefault(variant, []).append(f)
    return runs, sorted(variants), clocks


def table(runs, variants, base, stat="median"):
    of = statistics.median if stat == "median" else statistics.mean
    others = [v for v in variants if v != base]
    head = f"| model | T | {base} {stat} µs (n) |" + "".join(f" {v} µs (n) | change |" for v in others)
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (model, tokens) in sorted(runs):
        got = runs[(model, tokens)]
        if base not in got:
            continue
        b = of(got[base])
        cells = [model, str(tokens), f"{b:.1f} ({len(got[base])})"]
        for v in others:
            if v in got:
                m = of(got[v])
                cells += [f"{m:.1f} ({len(got[v])})", f"{m - b:+.1f} ({100 * (m / b - 1):+.1f}%)"]
            else:
                cells += ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def clock_table(runs, clocks, variants, base, stat="median"):
    """Each variant's SM clock and its change in clock and cycles (µs x MHz) against base, where
    both have clock lines; "" when no point has them."""
    of = statistics.median if stat == "median" else statistics.mean
    others = [v for v in variants if v != base]
    head = f"| model | T | {base} {stat} MHz (n) |" + "".join(f" {v} MHz (n) | clock | cycles |" for v in others)
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for key in sorted(clocks):
        got, us = clocks[key], runs.get(key, {})
        if base not in got or base not in us:
            continue
        bf, bu = of(got[base]), of(us[base])
        cells = [key[0], str(key[1]), f"{bf:.0f} ({len(got[base])})"]
        for v in others:
            if v in got and v in us:
                f, u = of(got[v]), of(us[v])
                cells += [f"{f:.0f} ({len(got[v])})", f"{100 * (f / bf - 1):+.1f}%", f"{100 * (u * f / (bu * bf) - 1):+.1f}%"]
            else:
                cells += ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--base", default=None)
    ap.add_argument("--stat", choices=["median", "mean"], default="median")
    a = ap.parse_args(argv)
    runs, variants, clocks = collect(a.folder)
    if not variants:
        print(f"ab_summary: {a.folder}: no <model>-<variant>-<rep>.txt file with result rows", file=sys.stderr)
        return 1
    base = a.base or ("main" if "main" in variants else variants[0])
    if base not in variants:
        print(f"ab_summary: --base: got {base}, need one of {', '.join(variants)}", file=sys.stderr)
        return 1
    print(table(runs, variants, base, a.stat))
    ct = clock_table(runs, clocks, variants, base, a.stat)
    if ct:
        print("\nSM clock over the timed replays, and the change in cycles (µs x MHz):\n")
        print(ct)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
