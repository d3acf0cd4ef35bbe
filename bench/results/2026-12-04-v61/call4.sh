#!/usr/bin/env bash
# v61 call 4 (carry [".carry/pr61"]: the probe with kinds 7-11): the alu_probe rows alone, with
# FFMA, IMAD, IADD3, FMUL and LOP3 / IMAD beside the wgmma (call 3 found LOP3 / VIADD keeping
# most of its rate where LOP3 / SHF lost it). ~10 s.
set -u
chmod +x .carry/pr61/rs_overlap
.carry/pr61/rs_overlap 12000 alu > "$OUT/probe-alu2.txt" 2>&1
echo "probe rc=$?"
cat "$OUT/probe-alu2.txt"
