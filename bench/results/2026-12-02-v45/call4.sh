#!/usr/bin/env bash
# v45 call 4: branch pfence's final code (the producer-side fence at the 128-token rsws kernels
# only): the whole test binary, EP apart, in 8 shards; then more A/B rounds against main at
# kimi-k2 T = 8192 and qwen3-30b T = 2048 (call 3's one loss). Carry .carry/z90 and .carry/z92.
set -u
source scripts/device_lib.sh
unxz .carry/z90/cli.xz .carry/bin/fp4moe_base
unxz .carry/z92/cli.xz .carry/bin/fp4moe_pfence2
unxz .carry/z92/tests.xz .carry/bin/fp4moe_tests
suite_shards
ab_rounds 330 360 "base pfence2" "kimi-k2:w4a16:8192 qwen3-30b:w4a16:2048 gpt-oss-120b:w4a16:8192"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report base | tee $OUT/ab-report.txt
