#!/usr/bin/env bash
# v87: branch epiq (on kaddr; carry .carry/v87e/{tests,cli}.xz, built from it): W4A4's h
# requantized by the wgmma GEMM 1's two-m-tile kernels after their epilogue (requant_h), the
# staging walking only the one-m-tile kernel's rows (HRows). One call:
#   1. the whole test binary, EP apart (8 shards: CudaStaging checks the narrow walks, the W4A4
#      CudaGemm cases, CudaGemmSm90Forced and the widths every sm90 kernel's h bit for bit);
#   2. bench --check at four W4A4 points (T = 8192: the split; 2048 and 512: rsws4 unsplit and
#      its width split);
#   3. until CALL_S (540) s since start, seven parallel compute-sanitizer processes:
#      device_lib.sh's sanitize_parallel and memcheck over the staging and W4A4 wgmma tests.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v87e/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/v87e/cli.xz .carry/bin/fp4moe_epiq || exit 1
staging_branch_checks epiq "${SPECS:-qwen3-30b:w4a4:8192 kimi-k2:w4a4:16384 kimi-k2:w4a4:2048 deepseek-v3:w4a4:512}" \
  "$staging_cases" \
  ${CALL_S:-540}
