#!/usr/bin/env bash
# After v85: every kernel of one W4A4 forward of main's CLI since the kperm merge (carry
# .carry/v85k/cli.xz) under ncu, at the points where the staging and requantization kernels
# (nvfp4_staging.cu, eight 4-byte pairs a lane on k-permuted rows) weigh most: their time and
# DRAM throughput against v62's (logical rows: qwen3-30b T = 8192 76 us, kimi-k2 T = 16384 305 us).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/cli.xz .carry/bin/fp4moe_k || exit 1
ncu_points .carry/bin/fp4moe_k "${POINTS:-qwen3-30b@8192@w4a4 kimi-k2@16384@w4a4 deepseek-v3@2048@w4a4}" ${CALL_S:-560}
echo "t=$(( $(date +%s) - start ))"
