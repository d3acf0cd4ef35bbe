#!/usr/bin/env bash
# v41 call 4: the decode kernels with three register stages of weights (B just in time; z79)
# against main (z78): alternated A/B processes at T = 1 W4A16; if w3 is faster, the whole test
# binary of z79, EP apart.
set -u
source scripts/device_lib.sh
unxz .carry/z78/cli.xz .carry/bin/fp4moe_main
unxz .carry/z79/cli.xz .carry/bin/fp4moe_w3
unxz .carry/z79/tests.xz .carry/bin/fp4moe_tests
ab_rounds 200 260 "main w3" "qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1 qwen3-30b:w4a16:1 kimi-k2:w4a16:1"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "end t=$(( $(date +%s) - start ))"
