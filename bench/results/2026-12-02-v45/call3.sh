#!/usr/bin/env bash
# v45 call 3: pfence at the 128-token rsws kernels only (kCw = 2; rsws4 as main), an alternated
# A/B against main (f24a268) where rsws runs: T = 2048-16384. One spec per model (the output
# files are named by model). Carry .carry/z90 (main's CLI) and .carry/z92 (this CLI).
set -u
source scripts/device_lib.sh
unxz .carry/z90/cli.xz .carry/bin/fp4moe_base
unxz .carry/z92/cli.xz .carry/bin/fp4moe_pfence2
ab_rounds 300 340 "base pfence2" \
  "qwen3-30b:w4a16:2048,8192,16384 qwen3-235b:w4a16:8192,16384 gpt-oss-120b:w4a16:16384 kimi-k2:w4a16:16384 deepseek-v3:w4a16:8192"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report base | tee $OUT/ab-report.txt
