#!/usr/bin/env bash
# v48 call 3 (carry [".carry/main-4f5edb4", ".carry/b-d50d413"]): main's kernels (4f5edb4) against
# v35's code (d50d413) at the points where v48's full table ran slower than v35's (qwen3-30b
# T = 16384 +7.3%, T = 8192 +3.3%; kimi-k2 T = 2048 / 16384 +2.6 / +1.9%), alternated processes,
# one T each, --check in round 1; qwen3-30b T = 512 as a control (v47: at parity). `bash ab-v35.sh` (~470 s).
set -u
source scripts/device_lib.sh
unxz .carry/main-4f5edb4/cli.xz .carry/bin/fp4moe_main
unxz .carry/b-d50d413/cli.xz .carry/bin/fp4moe_v35
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
ab_rounds ${ROUND_S:-420} ${POINT_S:-460} "main v35" \
  "qwen3-30b:w4a16:16384 qwen3-30b:w4a16:8192 kimi-k2:w4a16:2048 kimi-k2:w4a16:16384 qwen3-30b:w4a4:16384 qwen3-30b:w4a16:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
