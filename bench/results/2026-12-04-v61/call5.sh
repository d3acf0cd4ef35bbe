#!/usr/bin/env bash
# v61 call 5 (carry [".carry/pr61"]: the probe with kinds 12-13): the alu_probe rows alone, with
# F2FP (fp32 pair -> bf16x2) and I2FP (u32 -> fp32) beside the wgmma: the pipes a decode in
# fp32 arithmetic would need (notes v61 §2). ~10 s.
set -u
chmod +x .carry/pr61/rs_overlap
.carry/pr61/rs_overlap 12000 alu > "$OUT/probe-alu3.txt" 2>&1
echo "probe rc=$?"
cat "$OUT/probe-alu3.txt"
