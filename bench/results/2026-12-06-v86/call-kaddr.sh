#!/usr/bin/env bash
# v86: branch kaddr (c509655: the staging and x kernels address a k-permuted block's pairs from one
# base at constant offsets; carry .carry/v86a/{tests,cli}.xz, built from it) in one call:
#   1. the whole test binary, EP apart (8 shards; CudaStaging, CudaQuantize and the W4A4 cases
#      check the changed kernels bit for bit against the host);
#   2. bench --check of its CLI at three W4A4 points (the staging runs there);
#   3. until CALL_S (540) s since start, seven parallel compute-sanitizer processes:
#      device_lib.sh's sanitize_parallel (memcheck and racecheck over the tiles, the decode
#      kernels, the rsws cases: main's kernels since the kperm merge, unchanged on the branch)
#      and memcheck over the staging and W4A4 wgmma tests.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v86a/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/v86a/cli.xz .carry/bin/fp4moe_kaddr || exit 1
staging_branch_checks kaddr "${SPECS:-qwen3-30b:w4a4:8192 kimi-k2:w4a4:2048 deepseek-v3:w4a4:512}" \
  'CudaStaging.*:CudaQuantize.*:Cases/CudaGemmSm90Forced.MatchesHost/*w4a4*:CudaGemmCases/CudaGemm.MatchesHost/*w4a4_sm90*' \
  ${CALL_S:-540}
