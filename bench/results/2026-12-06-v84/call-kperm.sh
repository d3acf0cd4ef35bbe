#!/usr/bin/env bash
# v84: branch kperm (the k-permuted weight layout; carry .carry/v84k/{tests,cli}.xz): its whole
# test binary, EP apart (8 shards), then bench --check of its CLI at points that run every
# kernel family the rules pick (decode T = 1, fast path, rsws4, rsws, W4A4, MXFP4).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v84k/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/v84k/cli.xz .carry/bin/fp4moe_k || exit 1
${SKIP_SUITE:+false} suite_shards
check_points k "${SPECS:-kimi-k2:w4a16:1 kimi-k2:w4a16:8 kimi-k2:w4a16:512 kimi-k2:w4a16:2048 kimi-k2:w4a4:2048 gpt-oss-120b:w4a16:2048 qwen3-30b:w4a4:8192 kimi-k2:w4a16:16384}"
echo "t=$(( $(date +%s) - start ))"
