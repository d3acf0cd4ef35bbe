#!/usr/bin/env bash
# v37 call 2 (carry [".carry/z61"]: branch sm90-split-files + the check_problem fix, sm_90a).
# 1. Every test that names sm90 (320, incl. W4A4OnlyGemm1WouldTakeWgmma, which failed in v37's
#    first call on check_problem's old rule that both GEMMs take the wgmma kernels together),
#    then memcheck of the W4A4 staging tests.
# 2. v36's prepared threshold edges (prepared-rows-edges.sh), on this CLI.
set -u
source scripts/device_lib.sh
unxz .carry/z61/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z61/cli.xz .carry/bin/fp4moe_def
timeout 150 .carry/bin/fp4moe_tests --gtest_filter='*Sm90*:*sm90*' > $OUT/sm90-tests.log 2>&1
echo "sm90 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/sm90-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/sm90-tests.log | head
timeout 90 compute-sanitizer --tool memcheck .carry/bin/fp4moe_tests --gtest_filter='CudaGemmSm90.W4A4*' \
  > $OUT/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/memcheck.log) $(grep -E '^\[  (PASSED|FAILED)' $OUT/memcheck.log | tr '\n' ' ')"
echo "tests t=$(( $(date +%s) - start ))"
env_variant low .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=13"
env_variant high .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=22"
ab_round=0
while ok 420; do
  ab_round=$((ab_round + 1))
  for v in def low; do
    ab_point $v $ab_round kimi-k2 w4a16 640,704
    ab_point $v $ab_round deepseek-v3 w4a16 448,480
  done
  for v in def high; do
    ab_point $v $ab_round qwen3-30b w4a16 304,320,336
    ab_point $v $ab_round qwen3-235b w4a16 288,304,320
  done
done
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report def
