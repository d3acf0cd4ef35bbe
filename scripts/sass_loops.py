#!/usr/bin/env python3
"""The instructions of a kernel's inner loops, by opcode, from SASS: what a k loop costs per trip.

    scripts/sass.sh BUILD_DIR FILTER --dump        (writes BUILD_DIR/sass/<object>.sass)
    python3 scripts/sass_loops.py BUILD_DIR/sass/gemm_sm90_gemm1_widths.sass [KERNEL_SUBSTRING] [--all] [--nested]

For each kernel (its mangled name containing KERNEL_SUBSTRING, if given), each innermost loop (a
backward branch whose body holds no other backward branch: sass_loads.loops) with at least one
MMA (HMMA / HGMMA; --all: every innermost loop; --nested: every loop, also those that hold
others, such as a producer's step loop around its inline free-stage spin, marked "nested"):
its instructions, its MMAs, and the count of
each opcode (predicate and modifiers dropped: `@!P0 SYNCS.ARRIVE.TRANS64` counts as SYNCS), most
frequent first. A loop's count is per trip: divide by the k-blocks a trip takes. (v56: rsws4's
k loop, two k-blocks a trip, 219 instructions on main and 193 with two k-blocks a stage.)
Predicated-off instructions (`@!PT`) are listed too: they take an issue slot like any other.
"""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_loads import backward_branches, functions, loops, strip_predicate  # noqa: E402


def opcode(ins):
    """The opcode without guard or modifiers: '@!P0 SYNCS.ARRIVE.TRANS64 RZ, [UR4]' -> 'SYNCS'."""
    return re.split(r"[\s.]", strip_predicate(ins), 1)[0]


def loop_counts(code, show_all=False, nested=False):
    """[(start address, end address, instructions, MMAs, Counter of opcodes, innermost)] of code's
    innermost loops (those with an MMA unless show_all), or of all its loops (nested)."""
    inner = set(loops(code))
    out = []
    for s, e in sorted(backward_branches(code)) if nested else sorted(inner):
        body = [ins for _, ins in code[s : e + 1]]
        ops = collections.Counter(opcode(ins) for ins in body)
        mma = ops["HMMA"] + ops["HGMMA"]
        if mma or show_all or nested:
            out.append((code[s][0], code[e][0], len(body), mma, ops, (s, e) in inner))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    show_all, nested = "--all" in sys.argv, "--nested" in sys.argv
    text = open(args[0]).read()
    want = args[1] if len(args) > 1 else ""
    for name, code in functions(text):
        if want not in name:
            continue
        found = loop_counts(code, show_all, nested)
        if not found:
            continue
        print(f"{name[:120]}: {len(code)} instructions")
        for start, end, n, mma, ops, innermost in found:
            print(f"  loop 0x{start:x}-0x{end:x}: {n} instructions, {mma} MMA" + ("" if innermost else ", nested"))
            print("    " + ", ".join(f"{op} {k}" for op, k in ops.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
