#!/usr/bin/env bash
# v93: the whole test binary on main (carry .carry/v93/tests.xz), EP apart, 8 shards (~200-280 s):
# the H200 has not run it since v77 (910 of 910); H100s since (v92: 922 passed, 142 skipped).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v93/tests.xz .carry/bin/fp4moe_tests || exit 1
suite_shards
echo "t=$(( $(date +%s) - start ))"
