#!/usr/bin/env bash
# v83: main's fast path since the merge of fhoist (its test binary, carry .carry/v82/fh-tests.xz):
# memcheck over the two tile tests v82's memcheck did not reach, then racecheck over the fast
# path's tile tests until RACE_S seconds.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/fh-tests.xz .carry/bin/fp4moe_tests || exit 1
timeout ${MEM_S:-120} compute-sanitizer --tool memcheck --error-exitcode 3 .carry/bin/fp4moe_tests \
  --gtest_filter='CudaGemmSm80Tiles/*mxfp4_swiglu_bias_tile24:CudaGemmSm80Tiles/*mxfp4_swiglu_bias_tile32' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.txt" | tr '\n' ' ')"
timeout ${RACE_S:-150} compute-sanitizer --tool racecheck --error-exitcode 3 .carry/bin/fp4moe_tests \
  --gtest_filter="${RACE:-CudaGemmSm80Tiles/*}" > "$OUT/racecheck.txt" 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$OUT/racecheck.txt" | tr '\n' ' ') ok=$(grep -c 'OK \]' "$OUT/racecheck.txt")"
echo "t=$(( $(date +%s) - start ))"
