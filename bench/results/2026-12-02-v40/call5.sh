#!/usr/bin/env bash
# v40 call 5 (carry [".carry/z76"]): warp 0 groups the slots by warp votes and shuffles while the
# other consumer warps stage x; the combine loads 8 slots' y at once; the stamps only in a
# separate instantiation (FP4MOE_LAYER_TRACE). The one-kernel tests, the stamps, then A/B
# processes: the chain against the one-kernel layer (FP4MOE_DECODE_LAYER=8).
set -u
source scripts/device_lib.sh
unxz .carry/z76/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z76/cli.xz .carry/bin/fp4moe_main
timeout 90 stdbuf -oL .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.OneKernel*:CudaLayer.OneToken*' > $OUT/tests.log 2>&1
echo "tests rc=$? t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.log | head -20
for spec in qwen3-30b:w4a16 qwen3-235b:w4a16 kimi-k2:w4a16; do
  IFS=: read -r model q <<< "$spec"
  FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_TRACE=$OUT/trace-$model-$q.txt timeout 60 .carry/bin/fp4moe_main bench --model $model \
    --quant $q --tokens 1 --iters 40 --check --no-baseline --no-ceilings > $OUT/bench-$model-$q.txt 2>&1
  echo "$model $q rc=$? $(grep -A1 ' tokens  forward' $OUT/bench-$model-$q.txt | tail -1 | cut -c1-60) $(grep -oE 'PASS|FAIL' $OUT/bench-$model-$q.txt | head -1)"
done
python3 scripts/layer_trace.py $OUT/trace-*.txt 2>&1 | grep -vE "^ +(issue1|issued1|issuedAhead|landed) "
echo "trace t=$(( $(date +%s) - start ))"
env_variant chain .carry/bin/fp4moe_main ""
env_variant one .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=8"
ab_rounds 330 400 "chain one" "qwen3-30b:w4a16:1 qwen3-30b:w4a4:1 qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1 qwen3-30b:w4a16:8"
ab_report chain
echo "end t=$(( $(date +%s) - start ))"
