#!/usr/bin/env bash
# v40 call 4 (carry [".carry/z75"]): the consumers meet once per batch of up to 4 units (every
# consumer thread adds some of the sums, then 4 warps run the 4 epilogues at once), the experts'
# output scales loaded at a batch's start, the combine spread over the CTAs. The one-kernel
# tests, the stamps, then ncu's warp states of kimi-k2 T = 1.
set -u
source scripts/device_lib.sh
unxz .carry/z75/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z75/cli.xz .carry/bin/fp4moe_main
timeout 90 stdbuf -oL .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.OneKernel*:CudaLayer.OneToken*' > $OUT/tests.log 2>&1
echo "tests rc=$? t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.log | head -20
for spec in qwen3-30b:w4a16 qwen3-30b:w4a4 qwen3-235b:w4a16 kimi-k2:w4a16; do
  IFS=: read -r model q <<< "$spec"
  FP4MOE_LOG=1 FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_TRACE=$OUT/trace-$model-$q.txt timeout 60 .carry/bin/fp4moe_main bench --model $model \
    --quant $q --tokens 1 --iters 40 --check --no-baseline --no-ceilings > $OUT/bench-$model-$q.txt 2>&1
  echo "$model $q rc=$? $(grep -A1 ' tokens  forward' $OUT/bench-$model-$q.txt | tail -1 | cut -c1-60) $(grep -E 'PASS|FAIL' $OUT/bench-$model-$q.txt | grep -oE 'PASS|FAIL' | head -1)"
  grep -m1 "decode layer T=" $OUT/bench-$model-$q.txt
done
python3 scripts/layer_trace.py $OUT/trace-*.txt
FP4MOE_DECODE_LAYER=1 timeout 200 ncu --clock-control none -k regex:decode_layer -c 1 --set full --import-source no \
  -o $OUT/layer .carry/bin/fp4moe_main bench --model kimi-k2 --tokens 1 --iters 2 --warmup 1 --no-check --no-baseline \
  --no-ceilings > $OUT/ncu.log 2>&1
echo "ncu rc=$? t=$(( $(date +%s) - start ))"
ncu --import $OUT/layer.ncu-rep --page source --print-source sass --csv > $OUT/layer.csv 2>/dev/null
python3 scripts/ncu_source_top.py $OUT/layer.csv --top 30 2>&1 | head -60
ncu --import $OUT/layer.ncu-rep --page details --section WarpStateStats --section SchedulerStats 2>/dev/null | grep -vE "^\s*$|----" | head -40
rm -f $OUT/layer.csv $OUT/layer.ncu-rep
echo "end t=$(( $(date +%s) - start ))"
