#!/usr/bin/env bash
# v77: branch early-w against main's order, one binary (carry .carry/ew: the branch's CLI and
# tests, sm_90a). FP4MOE_SM80_EARLY_W=0 is main's order (the first group's weights after the
# row tables' barrier); unset the branch's (before it). First the fast path's tests in 8 shards
# (the default: early); then A/B rounds point by point, round 1 with --check, after 2 s of
# replays (the power cap's clock), at points where the fast path's short-K GEMMs run.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
unxz .carry/ew/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/ew/cli.xz .carry/bin/fp4moe_ew || exit 1
test_shards '*Sm80*:CudaGemmCases/*:CudaLayer.*:CudaGemmEdge.*:Table/CudaLayerConformance.*' ${TEST_S:-100}
env_variant late .carry/bin/fp4moe_ew "FP4MOE_SM80_EARLY_W=0"
env_variant early .carry/bin/fp4moe_ew ""
specs="kimi-k2:w4a16:8 deepseek-v3:w4a16:128 qwen3-30b:w4a16:32 qwen3-30b:w4a16:128 qwen3-235b:w4a16:8 gpt-oss-120b:w4a16:32"
ab_rounds_by_point ${AB_START:-330} ${AB_STOP:-400} "late early" "$specs"
ab_report late
echo "t=$(( $(date +%s) - start ))"
