#!/usr/bin/env bash
# Prepared in v52 (carry [".carry/r51c", ".carry/lf52"]: main c2c3006's CLI, the same kernels as
# main, and branch ldfull's (ea844bc); timeout_s 600, ~520 s). Call 5 of v52 had ldfull 1.8-2.6% faster
# at kimi-k2 T = 8 / 32, qwen3-235b T = 32 and gpt-oss-120b T = 32 (1-2 processes each). Here:
# more points and rounds (qwen3-30b W4A4 T = 32 read +4.4% in its one process), main then ldfull
# per point (ab_rounds_by_point: no drift between a round's halves), after 2 s of replays each.
# If prepared-next-1.sh passed and ldfull gains: merge branch ldfull (it merges cleanly), rerun
# the rows it changes in both timings, update README / TRIED.
set -u
source scripts/device_lib.sh
unxz .carry/r51c/cli.xz .carry/bin/fp4moe_m
unxz .carry/lf52/cli.xz .carry/bin/fp4moe_l
env_variant main .carry/bin/fp4moe_m ""
env_variant ldfull .carry/bin/fp4moe_l ""
clocks_start 200
ab_rounds_by_point ${ROUND_S:-440} ${POINT_S:-500} "main ldfull" \
  "kimi-k2:w4a16:8,32,128 kimi-k2:w4a4:32 deepseek-v3:w4a16:8,32 qwen3-235b:w4a16:8,32,128 qwen3-30b:w4a16:8,32,128 qwen3-30b:w4a4:32,128 gpt-oss-120b:w4a16:8,32,128"
clocks_stop
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
