#!/usr/bin/env bash
# Prepared for the next session (after prepared-next.sh; ~330 s with start-up): branch
# decode-early-w, the decode kernels' first two k-blocks of weights requested as soon as the
# slot's expert is known, before the row tables (begin, count, the gather) are loaded and the CTA
# meets; main has them after (enter_slot). Only the non-one-token decode kernels change (GEMM 1 at
# T >= 2, GEMM 2 at every T).
#   bash bench/results/2026-12-02-v42/prepared-early-w.sh
# Carry .carry/z84/cli.xz (main 467b4cd) and .carry/z85 (the branch decode-early-w).
#   1. the decode kernels' tests against the host (every path's decode cases, every slice count)
#      and the T = 1 layer tests;
#   2. A/B main against the branch at T = 1-8, W4A16.
set -u
source scripts/device_lib.sh
unxz .carry/z84/cli.xz .carry/bin/fp4moe_main
unxz .carry/z85/cli.xz .carry/bin/fp4moe_early
unxz .carry/z85/tests.xz .carry/bin/fp4moe_tests
F='CudaGemmCases/*decode*:CudaGemmDecodeSplitCounts/*:CudaLayer.OneToken*:Table/CudaLayerConformance.*_T?:-*full_*'
stdbuf -oL timeout 100 .carry/bin/fp4moe_tests --gtest_filter="$F" > $OUT/tests.log 2>&1
echo "tests rc=$? ok=$(grep -c '^\[       OK' $OUT/tests.log) $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/tests.log | head -2 | tr '\n' ' ') t=$(( $(date +%s) - start ))"
ab_rounds 250 280 "main early" "qwen3-30b:w4a16:1,2,4,8 qwen3-235b:w4a16:1,2,4 gpt-oss-120b:w4a16:1,2,4" "kimi-k2:w4a16:1,2,4"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
