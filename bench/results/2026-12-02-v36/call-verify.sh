#!/usr/bin/env bash
# Prepared in v35 (carry [".carry/z57"]: main 0b7f0a6's CLI and test binary, sm_90a; ~450 s: racecheck of the width split test may take up to its 400 s guard).
# What v35 merged after its last GPU run: the span rows' formula split by kFolds (the rsws
# kernels of 2 consumer warpgroups and ws back on main's shorter one; rsws4 on the folding one in
# an equivalent form), the fold's threshold 0.2, and gemm_stream's PDL check on a launched
# kernel. On the GPU: the whole test binary (EP apart, 8 shards), with memcheck and racecheck of
# the width split test (every width and fold) beside it; then the layer with FP4MOE_PDL=1 (the
# stream path's PDL check) and `bench --check` at the fold's points.
set -u
source scripts/device_lib.sh
unxz .carry/z57/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z57/cli.xz .carry/bin/fp4moe
for tool in memcheck racecheck; do
  timeout 400 compute-sanitizer --tool $tool .carry/bin/fp4moe_tests \
    --gtest_filter='CudaGemmSm90.WidthSplitAtEveryWidth' > $OUT/$tool.log 2>&1 &
done
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
wait
for tool in memcheck racecheck; do
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log) $(grep -E '^\[  (PASSED|FAILED)' $OUT/$tool.log)"
done
echo "suite t=$(( $(date +%s) - start ))"
FP4MOE_PDL=1 FP4MOE_GEMM=stream timeout 60 .carry/bin/fp4moe bench --model qwen3-30b --tokens 1,8 --iters 20 --check \
  --no-baseline --no-ceilings > $OUT/stream-pdl.txt 2>&1
echo "stream PDL rc=$? $(grep -c PASS $OUT/stream-pdl.txt) PASS"
for m in qwen3-30b qwen3-235b; do
  for q in w4a16 w4a4; do
    FP4MOE_LOG=1 timeout 60 .carry/bin/fp4moe bench --model $m --quant $q --tokens 256 --iters 20 --check \
      --no-baseline --no-ceilings > $OUT/fold-$m-$q.txt 2>&1
    echo "fold $m $q rc=$? $(grep -c PASS $OUT/fold-$m-$q.txt) PASS, $(grep -c 'folded' $OUT/fold-$m-$q.txt) folded config lines"
  done
done
