#!/usr/bin/env bash
# Prepared in v36 (carry [".carry/z59"]: main 9169baa's test binary and CLI, sm_90a; ~300 s).
# v36 merged NVFP4's wgmma threshold by waves and the staging refusal where only GEMM 1 would
# take wgmma; its new GPU test (CudaGemmSm90.W4A4OnlyGemm1WouldTakeWgmma) was fixed after the
# device time and has not passed on a GPU. The whole test binary (EP apart, 8 shards, nothing
# beside it); then memcheck of the W4A4 staging tests; then the layer's --check where the
# threshold moved (qwen3-30b / qwen3-235b T = 256-304, both quantizations), with the config log.
set -u
source scripts/device_lib.sh
unxz .carry/z59/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z59/cli.xz .carry/bin/fp4moe
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
timeout 120 compute-sanitizer --tool memcheck .carry/bin/fp4moe_tests \
  --gtest_filter='CudaGemmSm90.W4A4*' > $OUT/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/memcheck.log) $(grep -E '^\[  (PASSED|FAILED)' $OUT/memcheck.log)"
for m in qwen3-30b qwen3-235b; do
  for q in w4a16 w4a4; do
    FP4MOE_LOG=1 timeout 60 .carry/bin/fp4moe bench --model $m --quant $q --tokens 256,272,288,304 --iters 20 --check \
      --no-baseline --no-ceilings > $OUT/rows-$m-$q.txt 2>&1
    echo "rows $m $q rc=$? $(grep -c PASS $OUT/rows-$m-$q.txt) PASS, $(grep -c 'sm90.*fast path' $OUT/rows-$m-$q.txt) fast-path lines"
  done
done
