#!/usr/bin/env bash
# v80: the whole test binary of branch hshift (carry .carry/hs/tests.xz), EP apart, in 8 shards.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/hs/tests.xz .carry/bin/fp4moe_tests || exit 1
suite_shards
echo "t=$(( $(date +%s) - start ))"
