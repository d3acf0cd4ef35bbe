#!/usr/bin/env bash
# v82: branch fhoist (carry .carry/v82/fh-cli.xz, fh-tests.xz) against main (.carry/v82/cli.xz,
# 3d1e603) under the power cap. fhoist keeps the fast path's per-thread shared-memory offsets and
# decode constants in registers (reg_fence before the slot loop) where the compiler rebuilt them
# from the thread index in every trip of the k loop: 8-token tiles 1,184 -> 1,152 SASS
# instructions a trip (MX 1,136 -> 1,070). First the branch's fast-path, decode and layout GEMM
# tests, then rounds point by point after 2 s of replays, round 1 with --check, the SM clock logged.
# Not run in v82 (no H200 started). To run it: on main, PACK=v82 scripts/build_gpu_carry.sh
# (main's cli.xz); then with fhoist.diff applied (git apply), PACK=v82fh scripts/build_gpu_carry.sh
# and mv .carry/v82fh/cli.xz .carry/v82/fh-cli.xz (tests.xz likewise); carry the two CLIs only with
# TESTS=none (the three .xz and the tree pass 64 MiB): TESTS=none AB_START=250 AB_STOP=330, ~350 s.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/v82/fh-cli.xz .carry/bin/fp4moe_fh || exit 1
if [ "${TESTS:-}" != none ]; then
  unxz .carry/v82/fh-tests.xz .carry/bin/fp4moe_tests || exit 1
  filter_tests "${TESTS:-CudaGemmSm80Tiles/*:CudaGemmDecodeSplitCounts/*:CudaGemmLayout.*}" gemm-tests ${TESTS_S:-120} | tee "$OUT/tests-summary.txt"
fi
ab_session ${AB_START:-430} ${AB_STOP:-540} "main fh" "${SPECS:-kimi-k2:w4a16:8 deepseek-v3:w4a16:128 kimi-k2:w4a16:32 gpt-oss-120b:w4a16:32 kimi-k2:w4a16:128}"
echo "t=$(( $(date +%s) - start ))"
