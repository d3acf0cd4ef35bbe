#!/usr/bin/env python3
"""Where a kernel's warps stall, from ncu's source page (SASS with warp-state samples).

    ncu --import REPORT.ncu-rep --page source --print-source sass --csv > REPORT.csv
    python3 scripts/ncu_source_top.py REPORT.csv [--top N]

Prints the total samples, the samples per opcode (the first word of the SASS, predicate
stripped), the N instructions with the most samples, and, when the page has addresses and
executed counts, each mbarrier wait with the share of its executions that had to retry
(barrier_waits). --kernel N reads only the N-th launch of a page of several. With --regions,
the first kernel's instructions are also cut at its first and last wgmma (an mma.sync kernel:
at its k loop's head and its last HMMA) and at its setmaxnreg.dealloc (a warp-specialized
kernel's producer branch), and each piece is printed with its share of the samples and of the
executed instructions and its most frequent stall reasons (regions). ncu names its sample columns
differently across versions, so the sample column is found by name ("Warp Stall Sampling
(All Samples)", else the first column with "Sampl" in its name); a file without one is
described instead of guessed at.
"""
import argparse
import csv
import math
import re
import sys
from collections import Counter

# A SASS line's predicate ("@P0 ", "@!UPT "), and a branch's target address (group 1), with
# ptxas's label before it where ncu prints one.
PREDICATE = r"@!?U?P[0-9T]\s+"
BRA_TARGET = r"BRA\s+(?:`\(\.L_x_\d+\)\s+)?(0x[0-9a-f]+)"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--regions", action="store_true", help="also the samples and stall reasons per kernel region")
    ap.add_argument("--kernel", type=int, default=None,
                    help="read only the N-th (from 0) kernel of a page of several launches")
    args = ap.parse_args()
    with open(args.csv, newline="", errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    headers = [i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r)]
    if args.kernel is not None:
        if not 0 <= args.kernel < len(headers):
            print(f"{args.csv}: --kernel {args.kernel}: the page has {len(headers)} kernels")
            return 1
        a = headers[args.kernel]
        rows, headers = rows[a:launch_end(rows, a)], [0]
    header_at = headers[0] if headers else None
    if header_at is None:
        print(f"{args.csv}: no 'Source' column; first lines:")
        for r in rows[:5]:
            print("  ", ",".join(r)[:160])
        return 1
    header = [c.strip() for c in rows[header_at]]
    src = header.index("Source")
    samples = next((i for i, c in enumerate(header) if c.startswith("Warp Stall Sampling (All")), None)
    if samples is None:
        samples = next((i for i, c in enumerate(header) if "Sampl" in c), None)
    if samples is None:
        print(f"{args.csv}: no sample column; columns: {header}")
        return 1
    body = [r for r in rows[header_at + 1:] if len(r) > max(src, samples)]
    total = sum(number(r[samples]) for r in body)
    print(f"{args.csv}: {len(body)} instructions, {total:.0f} samples ({header[samples]})")
    if total <= 0:
        return 0
    by_op = Counter()
    for r in body:
        op = re.sub("^" + PREDICATE, "", r[src].strip()).split(" ")[0]
        by_op[op] += number(r[samples])
    print("per opcode:", ", ".join(f"{op} {100 * n / total:.1f}%" for op, n in by_op.most_common(12)))
    addr = header.index("Address") if "Address" in header else None
    for r in sorted(body, key=lambda r: -number(r[samples]))[: args.top]:
        where = r[addr] if addr is not None else ""
        print(f"  {100 * number(r[samples]) / total:5.1f}%  {where:>8}  {r[src].strip()[:90]}")
    if addr is not None and "Instructions Executed" in header:
        barrier_waits(body, src, addr, header.index("Instructions Executed"))
    if args.regions:
        # The first kernel only: a page of several launches repeats "Kernel Name" and the header.
        first = [r for r in rows[header_at + 1:launch_end(rows, header_at)] if len(r) > max(src, samples)]
        regions(first, header, src, samples)
    return 0


def launch_end(rows, header_at):
    """Where the launch whose header line is rows[header_at] ends: at the next launch's
    "Kernel Name" line (a page of several launches repeats it and the header), or the page's end."""
    return next((i for i in range(header_at + 1, len(rows)) if rows[i][0].startswith("Kernel Name")), len(rows))


def regions(body, header, src, samples):
    """Samples, executed instructions and stall reasons per region of one kernel.

    The regions, in address order: up to the first wgmma (the setup and the first k-block's
    decode), the first to the last wgmma (the k loop), after the last wgmma up to the
    setmaxnreg.dealloc (the consumers' epilogue), and from there on (the producer). A kernel
    without wgmma (mma.sync: HMMA) is cut where the innermost loop around its first HMMA begins
    (that loop's head, with its cp.async wait, comes before the first HMMA in address order) and
    after its last HMMA: its setup, its k loops and its epilogue; without a loop found, at its
    first HMMA. Without either or a dealloc the missing cuts are left out. Stall reasons are the
    page's stall_* columns (all samples, not the "Not Issued" ones).
    """
    ops = [r[src].strip() for r in body]
    hg = [i for i, o in enumerate(ops) if "HGMMA" in o]
    dealloc = next((i for i, o in enumerate(ops) if "SETMAXREG.DEALLOC" in o), None)
    cuts = [("to the first wgmma", 0)]
    if hg:
        cuts += [("first to last wgmma", hg[0]), ("after the last wgmma", hg[-1] + 1)]
    else:  # an mma.sync kernel (the fast path, the decode kernels)
        mma = [i for i, o in enumerate(ops) if re.match(f"({PREDICATE})?HMMA", o)]
        if mma:
            head = loop_head(body, header, src, mma[0])
            if head is None:
                cuts = [("to the first mma", 0), ("first to last mma", mma[0])]
            else:
                cuts = [("to the k loop", 0), ("k loop to last mma", head)]
            cuts.append(("after the last mma", mma[-1] + 1))
    if dealloc is not None and (not hg or dealloc > hg[-1]):
        cuts.append(("from setmaxnreg.dealloc", dealloc))
    executed = header.index("Instructions Executed") if "Instructions Executed" in header else None
    stalls = [i for i, c in enumerate(header) if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(number(r[samples]) for r in body) or 1.0
    total_ex = sum(number(r[executed]) for r in body) if executed is not None else 0.0
    print("regions (share of samples; of executed instructions; stall reasons):")
    for k, (name, a) in enumerate(cuts):
        b = cuts[k + 1][1] if k + 1 < len(cuts) else len(body)
        part = body[a:b]
        n = sum(number(r[samples]) for r in part)
        ex = f"{100 * sum(number(r[executed]) for r in part) / total_ex:5.1f}%" if total_ex > 0 else "    ?"
        reasons = Counter({header[j][len("stall_"):]: sum(number(r[j]) for r in part) for j in stalls})
        why = ", ".join(f"{what} {100 * v / n:.0f}%" for what, v in reasons.most_common(5) if v > 0) if n > 0 else ""
        print(f"  {name:24s} [{a:5d}, {b:5d})  {100 * n / total:5.1f}%  {ex}  {why}")


def row_at(body, addr):
    """Each row's index by its address (column `addr`, lower case): where a branch lands."""
    return {r[addr].strip().lower(): i for i, r in enumerate(body)}


def loop_head(body, header, src, first):
    """The index of the innermost loop's head around instruction `first`: the highest branch
    target at or before it of a branch after it; None without an address column or such a branch."""
    if "Address" not in header:
        return None
    at = row_at(body, header.index("Address"))
    heads = []
    for r in body[first + 1:]:
        m = re.search(r"\b" + BRA_TARGET, r[src], re.IGNORECASE)
        t = at.get(m.group(1).lower()) if m else None
        if t is not None and t <= first:
            heads.append(t)
    return max(heads) if heads else None


def barrier_waits(body, src, addr, executed):
    """How often each mbarrier wait found its phase incomplete.

    ptxas compiles a wait loop as an inline SYNCS...TRYWAIT, a branch to an out-of-line retry
    when it fails, and the retry's own TRYWAIT loop. For each inline wait: how many times it
    ran, the share that branched to the retry, and the retries per inline wait. A consumer
    that waits on most k-blocks for a full stage is starved of data; a producer that waits on
    most for a free stage is ahead of its consumers.
    """
    at = row_at(body, addr)
    lines = []
    for i, r in enumerate(body[:-1]):
        if "TRYWAIT" not in r[src]:
            continue
        nxt = body[i + 1][src].strip()
        m = re.match(r"@!P\d\s+" + BRA_TARGET, nxt)
        if not m or m.group(1).lower() not in at:
            continue
        j = at[m.group(1).lower()]
        if j == i or "TRYWAIT" not in body[j][src]:
            continue  # a retry block's own loop, or not a wait
        inline, retries = number(r[executed]), number(body[j][executed])
        # the retry block's exit: the unconditional branch back, two instructions after its TRYWAIT
        exits = number(body[j + 2][executed]) if j + 2 < len(body) and "BRA" in body[j + 2][src] else float("nan")
        if inline > 0:
            lines.append((inline, r[addr].strip(), retries, exits))
    if not lines:
        return
    print("mbarrier waits (inline executions; share that retried; retries per inline wait):")
    for inline, where, retries, exits in sorted(lines, reverse=True):
        share = "    ?" if math.isnan(exits) else f"{100 * exits / inline:5.1f}%"
        print(f"  {where:>8}  {inline:12.0f}  {share}  {retries / inline:6.2f}")


if __name__ == "__main__":
    sys.exit(main())
