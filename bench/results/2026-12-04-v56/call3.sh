#!/usr/bin/env bash
# v56 call 3 (carry .carry/kt56: branch kpair's test binary, sm_90a, stripped, xz): the whole test
# binary, EP apart, in 8 shards; then memcheck and racecheck over the wgmma kernels' one-k-block
# and odd-KB cases.
set -u
source scripts/device_lib.sh
unxz .carry/kt56/tests.xz .carry/bin/fp4moe_tests
suite_shards
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 .carry/bin/fp4moe_tests \
    --gtest_filter='Cases/CudaGemmSm90Forced.MatchesHost/*one_kblock*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*large_nvfp4_odd*rsws*' \
    > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool.txt" | tr '\n' ' ')"
done
echo "t=$(( $(date +%s) - start ))"
