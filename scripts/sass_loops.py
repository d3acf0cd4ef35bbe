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

    python3 scripts/sass_loops.py A.sass [KERNEL_SUBSTRING] --against B.sass

compares two builds' dumps of one object (a branch against main): for each kernel of A also in B,
by its name and integer template arguments (`sm90_rsws_gemm<8,1,4,0,6>`: the anonymous
namespace's tag may differ between builds), the instructions of its MMA loops in A and in B, in
address order, and the change. (v57: rsws4's GEMM 1 k loop 193 on main, 176 on branch hoist.)
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


def short_name(mangled):
    """A kernel's name and integer template arguments, '_ZN..14sm90_rsws_gemmILi8ELb1EE..' ->
    'sm90_rsws_gemm<8,1>'; the mangled name itself when it has no template arguments or others
    than integers (which the short name would drop)."""
    for m in re.finditer(r"(?=([1-9]\d*))", mangled):  # every start, so '4sm8017sm80_g..' finds 17
        n, end = int(m.group(1)), m.start() + len(m.group(1))
        ident, rest = mangled[end : end + n], mangled[end + n :]
        if len(ident) == n and re.fullmatch(r"[A-Za-z_]\w*", ident) and rest.startswith("I"):
            args = re.match(r"I((?:L[a-z]+\d+E)+)E", rest)
            if args:
                values = re.findall(r"L[a-z]+(\d+)E", args.group(1))
                return ident + "<" + ",".join(values) + ">"
    return mangled


def mma_loops(text, want):
    """{short name: [instructions of each MMA loop, in address order]} of the kernels of a dump whose
    mangled name holds `want`; a kernel whose short name another one shares is keyed by its
    mangled name."""
    found = [(name, [n for _, _, n, _, _, _ in loop_counts(code)]) for name, code in functions(text) if want in name]
    shared = collections.Counter(short_name(name) for name, _ in found)
    return {short_name(name) if shared[short_name(name)] == 1 else name: counts for name, counts in found}


def compare(text_a, text_b, want):
    """Lines 'kernel: loop i: A -> B (change)' for the kernels of A also in B (see the docstring)."""
    a, b = mma_loops(text_a, want), mma_loops(text_b, want)
    lines = []
    for name in sorted(a):
        if name not in b:
            continue
        for i in range(max(len(a[name]), len(b[name]))):
            na = a[name][i] if i < len(a[name]) else None
            nb = b[name][i] if i < len(b[name]) else None
            change = f" ({nb - na:+d})" if na is not None and nb is not None else ""
            lines.append(f"{name}: loop {i}: {na if na is not None else '-'} -> {nb if nb is not None else '-'}{change}")
    return lines


def main():
    argv = sys.argv[1:]
    against = None
    if "--against" in argv:
        i = argv.index("--against")
        if i + 1 >= len(argv):
            print(__doc__)
            return 2
        against = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    show_all, nested = "--all" in argv, "--nested" in argv
    text = open(args[0]).read()
    want = args[1] if len(args) > 1 else ""
    if against is not None:
        print("\n".join(compare(text, open(against).read(), want)))
        return 0
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
