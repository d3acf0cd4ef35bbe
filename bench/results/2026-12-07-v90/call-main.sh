#!/usr/bin/env bash
# v90: main after "decode_layer: every consumer thread releases its stage" (carry
# .carry/v90/{tests,cli}.xz, built from main by PACK=v90 bash scripts/build_gpu_carry.sh).
# v89's racecheck reported 24 hazards in the one-kernel T = 1 layer; main since v85 (kperm,
# fhoist) has not run its whole suite since v85's H100 call. One call:
#   1. the whole test binary, EP apart (8 shards);
#   2. bench --check at SPECS (default: five points over the paths the rules pick);
#   3. until CALL_S (330) s since start, memcheck over the W4A4 staging and wgmma tests beside
#      sanitize_parallel's six jobs (racecheck over the one-kernel layer among them).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v90/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/v90/cli.xz .carry/bin/fp4moe_main || exit 1
staging_branch_checks main \
  "${SPECS-kimi-k2:w4a16:1,8 kimi-k2:w4a4:128,2048 qwen3-30b:w4a4:8192 deepseek-v3:w4a16:512 gpt-oss-120b:w4a16:32}" \
  "$staging_cases" \
  ${CALL_S:-330}
