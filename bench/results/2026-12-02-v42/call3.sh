#!/usr/bin/env bash
# v42 call 3: branch decode-l2pf (FP4MOE_DECODE_PF=P: before a decode kernel's CTA of the first
# wave waits for the grid before it, lane 0 of each warp fetches k-blocks 2 .. P + 1 of its slice
# into L2; GEMM 1 of one token during the permute, GEMM 2 during GEMM 1's last CTAs).
# Carry .carry/z82 (the branch's sm_90a CLI and tests).
#   1. the decode and T = 1 layer tests with P = 64 (every slice fetched whole);
#   2. A/B at T = 1 and 4, W4A16: P = 0 (the control: main's code path), 4, 16, 64, alternated;
#      then kimi-k2 T = 1 with P = 0, 4, 16.
set -u
source scripts/device_lib.sh
unxz .carry/z82/cli.xz .carry/bin/fp4moe_br
unxz .carry/z82/tests.xz .carry/bin/fp4moe_tests
F='CudaGemmDecodeSplitCounts/*:CudaLayer.OneToken*:CudaLayer.OneKernel*'
FP4MOE_DECODE_PF=64 stdbuf -oL timeout 150 .carry/bin/fp4moe_tests --gtest_filter="$F" > $OUT/tests-pf64.log 2>&1
echo "tests pf64 rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-pf64.log | tr '\n' ' ') t=$(( $(date +%s) - start ))"
for pf in 0 4 16 64; do env_variant pf$pf .carry/bin/fp4moe_br "FP4MOE_DECODE_PF=$pf"; done
ab_rounds 250 280 "pf0 pf4 pf16 pf64" "qwen3-235b:w4a16:1,4 gpt-oss-120b:w4a16:1,4 qwen3-30b:w4a16:1,4"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_rounds 470 480 "pf0 pf4 pf16" "kimi-k2:w4a16:1"
echo "kimi rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report pf0 | tee $OUT/ab-report.txt
