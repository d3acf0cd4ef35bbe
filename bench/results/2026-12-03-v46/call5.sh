#!/usr/bin/env bash
# v46 call 5: v35's code (d50d413, the code of v35's full table) against main 19a7664 at the
# points where v46's partial table ran slower than v35's (T = 512 / 2048), alternated processes.
# Carry: .carry/z93/cli.xz (main), .carry/z97/cli.xz (d50d413), both sm_90a Release, stripped.
set -u
source scripts/device_lib.sh
unxz .carry/z93/cli.xz .carry/bin/fp4moe_main
unxz .carry/z97/cli.xz .carry/bin/fp4moe_v35
ab_rounds ${ROUND_S:-250} ${POINT_S:-300} "main v35" \
  "kimi-k2:w4a16:512 qwen3-30b:w4a16:512,2048 qwen3-235b:w4a16:512 gpt-oss-120b:w4a16:2048"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
