#!/usr/bin/env bash
# v85: branch kperm at 94d1a47: pytest from its cp312 sm_90a wheel (carry .carry/whlk), then
# racecheck over the staging tests and the forced W4A4 wgmma cases with its test binary (carry
# .carry/v85k/tests.xz), until SAN_S (default 500) s since start.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
pytest_wheel .carry/whlk/*.whl 240
unxz .carry/v85k/tests.xz .carry/bin/fp4moe_tests || exit 1
left=$(( ${SAN_S:-500} - ($(date +%s) - start) ))
[ $left -gt 30 ] && sanitize racecheck 'CudaStaging.*:Cases/CudaGemmSm90Forced.MatchesHost/*w4a4*:CudaGemmCases/CudaGemm.MatchesHost/*w4a4_sm90*' $left
echo "t=$(( $(date +%s) - start ))"
