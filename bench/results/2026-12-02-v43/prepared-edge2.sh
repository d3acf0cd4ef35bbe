#!/usr/bin/env bash
# Prepared for the next session (~330 s with start-up): branch decode-edge, GEMM 2 on the decode
# kernels from 1 wanted warp per row unit (kDecodeEdgeAfterDecode) where GEMM 1 ran on them;
# main splits from 2 for both. By a replica of the rule this moves GEMM 2 from the fast path to
# the decode kernels at qwen3-30b T = 7-8, qwen3-235b T = 4, kimi-k2 and deepseek-v3 T = 2-3 (both
# quantizations); call 5 of v43 measured qwen3-30b T = 8 only (-7.2%).
#   bash bench/results/2026-12-02-v43/prepared-edge2.sh
# Carry .carry/z87 (the branch's sm_90a CLI and test binary).
#   1. the rule's tests, the decode cases and split counts against the host, the T <= 9
#      conformance cases (their GEMM 2 now on the decode kernels where GEMM 1 is);
#   2. A/B: FP4MOE_DECODE_EDGE2=2 (main's rule) against the branch's default, at every point the
#      rule moves, W4A16 and W4A4.
set -u
source scripts/device_lib.sh
unxz .carry/z87/cli.xz .carry/bin/fp4moe_edge
unxz .carry/z87/tests.xz .carry/bin/fp4moe_tests
env_variant main .carry/bin/fp4moe_edge "FP4MOE_DECODE_EDGE2=2"
env_variant edge2 .carry/bin/fp4moe_edge ""
F='CudaGemmConfig.*:CudaGemmCases/*decode*:CudaGemmDecodeSplitCounts/*:Table/CudaLayerConformance.*_T?:-*full_*:*large_*'
stdbuf -oL timeout 150 .carry/bin/fp4moe_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/tests.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/tests.log | head -3 | tr '\n' ' ') t=$(( $(date +%s) - start ))"
grep -E '^\[  FAILED  \]' $OUT/tests.log | head -5
FP4MOE_LOG=1 timeout 60 .carry/bin/fp4moe_edge bench --model kimi-k2 --quant w4a16 --tokens 2 --iters 2 --no-check \
  --no-baseline --no-ceilings 2>&1 | grep -E 'gemm[12] decode' | head -2
ab_rounds 300 330 "main edge2" "qwen3-30b:w4a16:7,8 qwen3-235b:w4a16:4 qwen3-30b:w4a4:8" "kimi-k2:w4a16:2,3 deepseek-v3:w4a16:2,3 kimi-k2:w4a4:2"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
