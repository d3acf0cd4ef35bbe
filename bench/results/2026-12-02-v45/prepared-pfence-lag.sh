#!/usr/bin/env bash
# Prepared for a next session (v45 had no device time left; ~420 s with start-up): branch
# pfence-lag against main, v45 §3's lead. The branch announces each B fill kLag fills late
# from the producers, in rsws4 too (FP4MOE_PFENCE_LAG4, default 5; main: the consumers fence),
# and drains its pending fills at a unit's start only when the row tables are not free yet
# (main drains at every unit start; v45 §2 suspects this of qwen3-30b T = 2048's +0.5%).
# The branch's code: pfence-lag.diff next to this script (git apply on main 42f9913, the review's refactor of the producer, or later).
# Build here, sm_90a Release, and carry:
#   main's CLI as .carry/$MAIN/cli.xz; the branch's CLI and test binary as .carry/$LAG/{cli,tests}.xz
#   (strip, then xz), e.g. MAIN=z93 LAG=z94.
set -u
source scripts/device_lib.sh
unxz .carry/${MAIN:?}/cli.xz .carry/bin/fp4moe_main
unxz .carry/${LAG:?}/cli.xz .carry/bin/fp4moe_lag
unxz .carry/${LAG:?}/tests.xz .carry/bin/fp4moe_tests
# The wgmma GEMM and layer tests (the slowest shard took over 170 s in v45 call 2).
sm90_shards 200
# One spec per model: the outputs are named by model.
ab_rounds 370 400 "main lag" \
  "kimi-k2:w4a16:2048 qwen3-30b:w4a16:512,2048 qwen3-235b:w4a16:512,2048 gpt-oss-120b:w4a16:512 deepseek-v3:w4a16:2048"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
