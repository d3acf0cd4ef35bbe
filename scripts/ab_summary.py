#!/usr/bin/env python3
"""The table of an A/B run: bench outputs named <model>[@<tokens>]-<variant>-<rep>.txt in one folder (what the
device calls write: variants alternated, each repeated), as one markdown row per model and token
count with each variant's median (or mean) µs per layer over its repetitions (n) and its change
against the base variant. The median is the default: a process that lands on the power cap's
clock step moves a mean of few processes, not the median.

usage: ab_summary.py DIR [--base VARIANT] [--stat median|mean]

Variant names hold no '-'. The base is --base, else 'main' when present, else the first name in
sorted order. A file with no result rows (a run that failed or was cut short) counts for nothing.
"""
import argparse
import pathlib
import re
import statistics
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\d+(?:\.\d+)?)\s")


def read_rows(path):
    """{tokens: forward µs} from one bench output (the rows under the 'tokens  forward us' header)."""
    rows, in_table = {}, False
    for line in path.read_text(errors="replace").splitlines():
        if line.strip().startswith("tokens") and "forward us" in line:
            in_table = True
            continue
        m = ROW.match(line) if in_table else None
        if m:
            rows[int(m.group(1))] = float(m.group(2))
    return rows


def collect(folder):
    """{(model, tokens): {variant: [µs, ...]}} and the variants seen, sorted."""
    runs, variants = {}, set()
    for path in sorted(pathlib.Path(folder).glob("*.txt")):
        parts = path.stem.rsplit("-", 2)
        if len(parts) != 3:
            continue
        model, variant, _rep = parts
        model = model.split("@")[0]  # MODEL_QUANT@TOKENS (device_lib.sh's ab_point): the tokens are in the rows
        for tokens, us in read_rows(path).items():
            runs.setdefault((model, tokens), {}).setdefault(variant, []).append(us)
            variants.add(variant)
    return runs, sorted(variants)


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


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--base", default=None)
    ap.add_argument("--stat", choices=["median", "mean"], default="median")
    a = ap.parse_args(argv)
    runs, variants = collect(a.folder)
    if not variants:
        print(f"ab_summary: {a.folder}: no <model>-<variant>-<rep>.txt file with result rows", file=sys.stderr)
        return 1
    base = a.base or ("main" if "main" in variants else variants[0])
    if base not in variants:
        print(f"ab_summary: --base: got {base}, need one of {', '.join(variants)}", file=sys.stderr)
        return 1
    print(table(runs, variants, base, a.stat))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
