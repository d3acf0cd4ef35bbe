#!/usr/bin/env bash
# v42 call 4 (~170 s): branch slot-batch (find_slot: each lane loads 8 experts' counts at once, one
# load latency per 256 experts). Carry .carry/z83 (branch) and .carry/z78 (main d2f1719's CLI).
#   1. the GEMM tests of every path and the decode kernels at every slice count, against the host;
#   2. A/B main against the branch, W4A16, small presets (the time left).
set -u
source scripts/device_lib.sh
unxz .carry/z78/cli.xz .carry/bin/fp4moe_main
unxz .carry/z83/cli.xz .carry/bin/fp4moe_br
unxz .carry/z83/tests.xz .carry/bin/fp4moe_tests
stdbuf -oL timeout 75 .carry/bin/fp4moe_tests --gtest_filter='CudaGemmCases/*:CudaGemmDecodeSplitCounts/*' > $OUT/tests.log 2>&1
echo "tests rc=$? ok=$(grep -c '^\[       OK' $OUT/tests.log) failed=$(grep -c '^\[  FAILED' $OUT/tests.log) $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/tests.log | head -2 | tr '\n' ' ') t=$(( $(date +%s) - start ))"
ab_rounds 150 165 "main br" "qwen3-235b:w4a16:1,4,8 qwen3-30b:w4a16:1,8,32 gpt-oss-120b:w4a16:1,8"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
