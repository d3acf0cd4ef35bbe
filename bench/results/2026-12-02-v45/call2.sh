#!/usr/bin/env bash
# v45 call 2: branch pfence (the rsws producers announce each fill after their own proxy fence, the
# consumers fence no more) -- its sm90 GEMM and layer tests, then an alternated A/B against main
# (f24a268) at the rsws4 / rsws points of T = 512-16384.
# Carry .carry/z90 (main's CLI) and .carry/z91 (pfence's CLI and tests).
set -u
source scripts/device_lib.sh
unxz .carry/z90/cli.xz .carry/bin/fp4moe_base
unxz .carry/z91/cli.xz .carry/bin/fp4moe_pfence
unxz .carry/z91/tests.xz .carry/bin/fp4moe_tests
sm90_shards 170
ab_rounds 330 370 "base pfence" \
  "kimi-k2:w4a16:2048 qwen3-30b:w4a16:512,2048 qwen3-235b:w4a16:512,2048 gpt-oss-120b:w4a16:512,2048 deepseek-v3:w4a16:2048" \
  "kimi-k2:w4a16:16384 qwen3-30b:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report base | tee $OUT/ab-report.txt
