#!/usr/bin/env bash
# v85: branch kperm at 94d1a47 (carry .carry/v85k/{tests,cli}.xz), with v84's fix of the NVFP4 A
# staged for a wgmma GEMM 1 (ce73eb4): the whole test binary, EP apart (8 shards); bench --check
# at points that run every kernel family the rules pick; then memcheck over the staging tests and
# the forced W4A4 wgmma cases, until SAN_S (default 560) s since start.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/v85k/cli.xz .carry/bin/fp4moe_k || exit 1
${SKIP_SUITE:+false} suite_shards
check_points k "${SPECS:-kimi-k2:w4a16:1 kimi-k2:w4a16:8 kimi-k2:w4a16:512 kimi-k2:w4a16:2048 kimi-k2:w4a4:2048 gpt-oss-120b:w4a16:2048 qwen3-30b:w4a4:8192 kimi-k2:w4a16:16384}"
echo "check t=$(( $(date +%s) - start ))"
left=$(( ${SAN_S:-560} - ($(date +%s) - start) ))
[ $left -gt 30 ] && sanitize memcheck 'CudaStaging.*:Cases/CudaGemmSm90Forced.MatchesHost/*w4a4*:CudaGemmCases/CudaGemm.MatchesHost/*w4a4_sm90*' $left
echo "t=$(( $(date +%s) - start ))"
