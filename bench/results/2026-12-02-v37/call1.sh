#!/usr/bin/env bash
# v37 call 1 (device call 1 of v37): v36's prepared-verify.sh, unchanged.
# Prepared in v36 (carry [".carry/z60"]: branch sm90-split-files 62fc01d's test binary and CLI,
# sm_90a; ~300 s). The branch is main da07751 plus two build commits: gemm_sm90.cu in three
# files (no kernel changed) and every fatbin compressed. Main's own GPU change not yet run there:
# CudaGemmSm90.W4A4OnlyGemm1WouldTakeWgmma (fixed after v36's device time). If all of this
# passes, the branch merges (fast-forward), and main's test is verified with it.
# - The whole test binary (EP apart, 8 shards, nothing beside it). It runs every kernel of the
#   three files, and the width tests at every narrow and wide width.
# - memcheck of the W4A4 staging tests.
# - The layer's --check, with the config log, where v36's threshold moved (qwen3-30b /
#   qwen3-235b T = 256-304, both quantizations) and at the width and wide-width points (kimi-k2
#   T = 768 / 4096, deepseek-v3 T = 2048).
set -u
source scripts/device_lib.sh
unxz .carry/z60/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z60/cli.xz .carry/bin/fp4moe
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
timeout 120 compute-sanitizer --tool memcheck .carry/bin/fp4moe_tests --gtest_filter='CudaGemmSm90.W4A4*' \
  > $OUT/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/memcheck.log) $(grep -E '^\[  (PASSED|FAILED)' $OUT/memcheck.log)"
for m in qwen3-30b qwen3-235b; do
  for q in w4a16 w4a4; do
    FP4MOE_LOG=1 timeout 60 .carry/bin/fp4moe bench --model $m --quant $q --tokens 256,272,288,304 --iters 20 --check \
      --no-baseline --no-ceilings > $OUT/rows-$m-$q.txt 2>&1
    echo "rows $m $q rc=$? $(grep -c PASS $OUT/rows-$m-$q.txt) PASS, $(grep -c 'sm90.*fast path' $OUT/rows-$m-$q.txt) fast-path lines"
  done
done
for spec in kimi-k2:768,4096 deepseek-v3:2048; do
  IFS=: read -r m toks <<< "$spec"
  FP4MOE_LOG=1 timeout 90 .carry/bin/fp4moe bench --model $m --tokens $toks --iters 10 --check --no-baseline \
    --no-ceilings > $OUT/widths-$m.txt 2>&1
  echo "widths $m rc=$? $(grep -c PASS $OUT/widths-$m.txt) PASS, $(grep -c 'width' $OUT/widths-$m.txt) width lines"
done
echo "t=$(( $(date +%s) - start ))"
