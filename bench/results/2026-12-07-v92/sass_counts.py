#!/usr/bin/env python3
"""Instruction counts of the rs_overlap probe's kernels, from `cuobjdump --dump-sass` on stdin:
per rs_probe<NU, WGs, MODE>, the whole kernel's LDS, PRMT, LOP3, SHF, HMUL2, HGMMA and local
memory instructions (the LDS table decode's modes 7-9 against the PRMT decode's 0, 2 and 5)."""
import re
import sys
from collections import Counter

text = sys.stdin.read()
kinds = ["LDS", "PRMT", "LOP3", "SHF", "HMUL2", "IMAD", "HGMMA", "LDL", "STL"]
print("| tokens | WGs | mode | instructions | " + " | ".join(kinds) + " |")
print("|---" * (4 + len(kinds)) + "|")
for part in re.split(r"\n\s*Function : ", text)[1:]:
    m = re.search(r"rs_probeILi(\d+)ELi(\d+)ELi(\d+)E", part.split("\n", 1)[0])
    if not m:
        continue
    nu, wg, mode = map(int, m.groups())
    if mode not in (0, 2, 5, 7, 8, 9):
        continue
    ops = re.findall(r"/\*[0-9a-f]{4,5}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", part)
    c = Counter(ops)
    print(f"| {nu * 8} | {wg} | {mode} | {len(ops)} | " + " | ".join(str(c[k]) for k in kinds) + " |")
