#!/usr/bin/env python3
"""How far ahead of their use the global loads of a kernel's inner loops are issued, from SASS.

    scripts/sass.sh BUILD_DIR FILTER --dump        (writes BUILD_DIR/sass/<object>.sass)
    python3 scripts/sass_loads.py BUILD_DIR/sass/gemm_decode.sass [KERNEL_SUBSTRING] [--all]

For each kernel (its mangled name containing KERNEL_SUBSTRING, if given), the innermost loops
(a backward branch whose body holds no other backward branch) with at least one global load
(LDG). For each load in such a loop: the instructions and MMAs (HMMA / HGMMA) between it and the
first instruction that reads its destination registers, going round the loop's back edge when
the use is in the next iteration. The loop's shortest distance is the load that latency hits
first. (v41: under the decode kernels' 80-register cap ptxas issues the weight loads late, at
~50 instructions before their use; see bench/results/2026-12-02-v41-notes.md §2.) --all also
lists the loads of loops with no MMA.
"""
import re
import sys

INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
REG = re.compile(r"\bR(\d+)(\.64)?\b")


def functions(text):
    """(mangled name, [(address, instruction)]) per function of a cuobjdump -sass dump."""
    for part in re.split(r"\n\s*Function : ", text)[1:]:
        name = part.split("\n", 1)[0].strip()
        yield name, [(int(m.group(1), 16), m.group(2)) for m in INSTR.finditer(part)]


def widths(ins):
    """Registers written by a load: 1, 2 or 4 from its .64 / .128 suffix."""
    return 4 if ".128" in ins else 2 if ".64" in ins else 1


def strip_predicate(ins):
    """The instruction without its guard (@P0, @!UP1, ...)."""
    return re.sub(r"^@!?U?P\w+\s+", "", ins)


def operands(ins):
    """(destination registers, source registers) of one instruction, predicate stripped. Register
    operands that stand for several registers: Rn.64 (a pair), an HMMA's fragments (D, A and C of
    4 registers, B of 2), a wide load's destination, an IMAD.WIDE's destination and addend."""
    parts = strip_predicate(ins).split(None, 1)
    if len(parts) < 2:
        return set(), set()
    op = parts[0]
    found = REG.findall(parts[1])
    if not found:
        return set(), set()
    counts = [2 if wide else 1 for _, wide in found]
    if op.startswith("HMMA") and len(found) == 4:
        counts = [4, 4, 2, 4]
    elif op.startswith("LD"):
        counts[0] = widths(op)
    elif op.startswith("IMAD.WIDE"):
        counts[0] = counts[-1] = 2
    regs = [set(range(int(r), int(r) + c)) for (r, _), c in zip(found, counts)]
    if op.startswith(("ST", "RED", "ATOM", "BRA")):
        return set(), set().union(*regs)
    return regs[0], set().union(set(), *regs[1:])


def backward_branches(code):
    """Every loop, innermost or not: (target index, branch index) of each backward branch."""
    index = {a: i for i, (a, _) in enumerate(code)}
    found = []
    for i, (addr, ins) in enumerate(code):
        m = BRANCH.search(ins)
        if m and int(m.group(1), 16) <= addr and int(m.group(1), 16) in index:
            found.append((index[int(m.group(1), 16)], i))
    return found


def loops(code):
    """Innermost loops: (start index, end index) of each backward branch with no backward branch inside."""
    found = backward_branches(code)
    return [(s, e) for s, e in found if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e) for s2, e2 in found)]


def distances(body):
    """For each LDG in body: (instruction, instructions to first use, MMAs in between)."""
    out = []
    n = len(body)
    for i, ins in enumerate(body):
        op = strip_predicate(ins)
        if not op.startswith("LDG"):
            continue
        regs = operands(ins)[0]
        if not regs:
            continue
        mmas = 0
        for d in range(1, n + 1):
            other = body[(i + d) % n]
            written, read = operands(other)
            if regs & read:
                out.append((op, d, mmas))
                break
            regs -= written  # overwritten unread: that register's load was not what it waits for
            if not regs:
                out.append((op, None, mmas))
                break
            if "MMA" in other:
                mmas += 1
        else:
            out.append((op, None, mmas))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    show_all = "--all" in sys.argv
    text = open(args[0]).read()
    want = args[1] if len(args) > 1 else ""
    for name, code in functions(text):
        if want not in name:
            continue
        for s, e in loops(code):
            body = [ins for _, ins in code[s : e + 1]]
            mma = sum("MMA" in ins for ins in body)
            loads = distances(body)
            if not loads or (mma == 0 and not show_all):
                continue
            near = min((d for _, d, _ in loads if d is not None), default=None)
            print(f"{name[:100]}\n  loop 0x{code[s][0]:x}-0x{code[e][0]:x}: {len(body)} instructions, {mma} MMA, "
                  f"{len(loads)} loads, nearest use {near} instructions after its load")
            for op, d, m in loads:
                where = "never read in the loop" if d is None else f"used {d:4d} instructions ({m} MMA) later"
                print(f"    {op[:56]:56s} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
