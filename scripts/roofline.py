#!/usr/bin/env python3
"""Roofline plot of `fp4moe bench --json` results.

    python3 scripts/roofline.py RESULT.json [MORE.json ...] -o roofline.png

One panel per (preset, quantization); in each, log-log microseconds against tokens:
fp4moe's median forward time, its floor (max(bytes / copy rate, flops / GEMM rate), the
ceilings measured in the same run) and the bf16 cuBLAS baseline, each point of fp4moe
labelled with floor/time. Several files (e.g. two commits) draw over one another, told
apart by their git commit. The JSON schema is in bench/README.md. Needs matplotlib.
"""
import argparse
import json
import math
import sys


def palette_png(path):
    """Rewrites a PNG as 256 colours (median cut, no dither): a third of the bytes for these
    plots, their few colours and anti-aliased edges unchanged to the eye. The results travel
    with every device call, whose tree has a size limit."""
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as im:
        q = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    q.save(path, optimize=True)


def load_runs(path):
    """Runs of one file, each with its file's commit; also reads the schema-1 single run."""
    with open(path) as f:
        doc = json.load(f)
    if "runs" in doc:
        runs = doc["runs"]
    elif "rows" in doc or "skipped" in doc:
        runs = [doc]  # schema 1: one run per file, no ceilings
    else:
        raise SystemExit(f"{path}: neither 'runs' nor 'rows': not an fp4moe bench result")
    commit = doc.get("git_commit", "?")
    out = []
    for r in runs:
        if "rows" not in r:
            why = r.get("skipped") or r.get("error") or "no rows"
            print(f"{path}: {r.get('preset')} {r.get('quant')}: {why}", file=sys.stderr)
            continue
        out.append((commit, r))
    return out


def finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def series(rows, key):
    pts = [(r["tokens"], r.get(key)) for r in rows]
    pts = [(t, v) for t, v in pts if finite(v)]
    return [t for t, _ in pts], [v for _, v in pts]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="fp4moe bench --json files")
    ap.add_argument("-o", "--output", default="roofline.png", help="PNG to write (default roofline.png)")
    ap.add_argument("--title", default=None, help="figure title (default: the device)")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = {}  # (preset, quant) -> [(commit, run)]
    devices = set()
    for path in args.json:
        for commit, run in load_runs(path):
            panels.setdefault((run["preset"], run.get("quant", "w4a16")), []).append((commit, run))
            devices.add(run.get("device", "?"))
    if not panels:
        raise SystemExit("no run with rows in the given files")

    n = len(panels)
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.2 * nrows), squeeze=False)
    many = len(args.json) > 1
    for ax, ((preset, quant), entries) in zip(axes.flat, sorted(panels.items())):
        for i, (commit, run) in enumerate(entries):
            rows = sorted(run["rows"], key=lambda r: r["tokens"])
            tag = f" {commit}" if many else ""
            color = f"C{i % 10}"
            t, us = series(rows, "forward_us_median")
            ax.plot(t, us, "o-", color=color, label=f"fp4moe {run.get('backend', '')}{tag}")
            for r in rows:
                if finite(r.get("floor_fraction")) and finite(r.get("forward_us_median")):
                    ax.annotate(f"{100 * r['floor_fraction']:.0f}%", (r["tokens"], r["forward_us_median"]),
                                textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7, color=color)
            t, fl = series(rows, "floor_us")
            if t:
                ax.plot(t, fl, "--", color=color, alpha=0.7, label=f"floor{tag}")
            t, base = series(rows, "baseline_us_median")
            if t:
                ax.plot(t, base, "s:", color=color, alpha=0.7, markersize=4, label=f"bf16 cuBLAS baseline{tag}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_ylabel("µs per layer")
        ax.set_title(f"{preset} {quant.upper()}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(args.title or ", ".join(sorted(devices)) + " (labels: floor / time)")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    if args.output.lower().endswith(".png"):
        palette_png(args.output)
    print(f"wrote {args.output} ({n} panel{'s' if n > 1 else ''})")


if __name__ == "__main__":
    main()
