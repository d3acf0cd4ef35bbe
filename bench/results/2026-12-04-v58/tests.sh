#!/usr/bin/env bash
# Prepared in v57 for the next session (branch hoist, §3 of the v57 notes). Carry .carry/ht57:
# tests.xz and cli.xz, hoist's test binary and CLI (sm_90a, stripped, xz), built by
#   git checkout hoist && ninja -C build-carry fp4moe_tests fp4moe
# The whole test binary, EP apart; memcheck and racecheck over the forced rsws / rsws4 cases of
# one k-block and odd KB, and over the MX ones; bench --check at points of each rsws kernel.
set -u
source scripts/device_lib.sh
unxz .carry/ht57/tests.xz .carry/bin/fp4moe_tests
unxz .carry/ht57/cli.xz .carry/bin/fp4moe_hoist
suite_shards
sanitizers 'Cases/CudaGemmSm90Forced.MatchesHost/*one_kblock*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*large_nvfp4_odd*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*mx*rsws*' 200
check_points hoist "deepseek-v3:w4a16:2048 kimi-k2:w4a4:1024 qwen3-235b:w4a16:8192 gpt-oss-120b:w4a16:512 gpt-oss-120b:w4a16:8192"
echo "t=$(( $(date +%s) - start ))"
