#!/usr/bin/env bash
# v82: branch fhoist's test binary (carry .carry/v82/fh-tests.xz): the whole binary, EP apart
# (8 shards), then memcheck and racecheck (SAN_TOOLS) over the fast path's tile tests (SAN).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/fh-tests.xz .carry/bin/fp4moe_tests || exit 1
suite_shards
for tool in ${SAN_TOOLS:-memcheck racecheck}; do
  timeout ${SAN_S:-140} compute-sanitizer --tool $tool --error-exitcode 3 .carry/bin/fp4moe_tests \
    --gtest_filter="${SAN:-CudaGemmSm80Tiles/*}" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool.txt" | tr '\n' ' ')"
done
echo "t=$(( $(date +%s) - start ))"
