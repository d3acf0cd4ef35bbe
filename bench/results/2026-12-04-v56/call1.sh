#!/usr/bin/env bash
# v56 call 1 (carry .carry/r55: main's CLI (library as 181973f), .carry/k56: branch kpair's CLI;
# both sm_90a, stripped, xz). kpair: the rsws kernels' ring stages hold two k-blocks under one
# full / empty barrier (SASS: rsws4's k loop 193 instructions per two k-blocks against 219).
# A/B under the cap (2 s of replays before each point), point-major, --check in round 1. ~520 s.
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe_main
unxz .carry/k56/cli.xz .carry/bin/fp4moe_kpair
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt"
ab_rounds_by_point 330 540 "main kpair" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 qwen3-30b:w4a16:512 deepseek-v3:w4a16:2048 gpt-oss-120b:w4a16:2048 qwen3-235b:w4a16:8192 kimi-k2:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
