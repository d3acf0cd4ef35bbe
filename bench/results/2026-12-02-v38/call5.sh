#!/usr/bin/env bash
# v38 call 5 (carry [".carry/z66"]): memcheck of the decode kernels at 16 and 11 forced slices
# (512- and 352-thread CTAs, the largest shared-memory partial sums) and of the T = 1 layer at
# every slice count.
set -u
source scripts/device_lib.sh
unxz .carry/z66/tests.xz .carry/bin/fp4moe_tests
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .carry/bin/fp4moe_tests \
  --gtest_filter='*DecodeSplits*_16:*DecodeSplits*_11:CudaLayer.OneTokenAtEverySliceCount' --gtest_brief=1 > $OUT/memcheck.log 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head
echo "end t=$(( $(date +%s) - start ))"
