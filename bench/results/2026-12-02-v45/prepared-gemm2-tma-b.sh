#!/usr/bin/env bash
# Prepared for a next session (v45 had no device time left; ~450 s with start-up): branch
# gemm2-tma-b against main, v45 §3's lead. In the rsws kernels GEMM 2's B (h, contiguous per
# expert) comes as one TMA box of 8 NU rows per stage (thread 0, on the stage's barrier), in
# place of the producers' cp.async, and the consumers skip their proxy fence;
# FP4MOE_SM90_TMA_B=0 gives back the cp.async path in the same binary.
# The branch's code: gemm2-tma-b.diff next to this script (git apply on main 42f9913 or later).
# Build here, sm_90a Release, and carry main's CLI as .carry/$MAIN/cli.xz and the branch's CLI
# and test binary as .carry/$TMAB/{cli,tests}.xz (strip, then xz).
set -u
source scripts/device_lib.sh
unxz .carry/${MAIN:?}/cli.xz .carry/bin/fp4moe_main
unxz .carry/${TMAB:?}/cli.xz .carry/bin/fp4moe_tmab_bin
unxz .carry/${TMAB:?}/tests.xz .carry/bin/fp4moe_tests
env_variant tmab .carry/bin/fp4moe_tmab_bin ""
env_variant tmaboff .carry/bin/fp4moe_tmab_bin "FP4MOE_SM90_TMA_B=0"
# The wgmma GEMM and layer tests with B by TMA (the default on the branch).
sm90_shards 200
# One spec per model: the outputs are named by model.
ab_rounds 380 410 "main tmab tmaboff" \
  "kimi-k2:w4a16:2048 qwen3-30b:w4a16:512,16384 qwen3-235b:w4a16:512,2048 gpt-oss-120b:w4a16:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
