#!/usr/bin/env bash
# v40 call 1 (carry [".carry/z72"]): main's binaries plus the one-kernel layer's stamps
# (FP4MOE_LAYER_TRACE). First the stamps: where the one-kernel layer's 30 us at qwen3-30b T = 1
# go. Then the whole GPU suite but the EP tests (it verifies 2b5c025's combine move).
set -u
source scripts/device_lib.sh
unxz .carry/z72/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z72/cli.xz .carry/bin/fp4moe_main
for spec in qwen3-30b:w4a16 qwen3-30b:w4a4 kimi-k2:w4a16; do
  IFS=: read -r model q <<< "$spec"
  FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_TRACE=$OUT/trace-$model-$q.txt timeout 60 .carry/bin/fp4moe_main bench --model $model \
    --quant $q --tokens 1 --iters 40 --check --no-baseline --no-ceilings > $OUT/bench-$model-$q-layer.txt 2>&1
  echo "$model $q layer rc=$? $(grep -E 'PASS|FAIL' $OUT/bench-$model-$q-layer.txt | head -1)"
  grep -A1 " tokens  forward" $OUT/bench-$model-$q-layer.txt | tail -1
done
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader
python3 scripts/layer_trace.py $OUT/trace-*.txt
echo "trace done t=$(( $(date +%s) - start ))"
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=240 timeout 270 bash scripts/gpu_suite.sh tests 2>&1 | tail -12
echo "suite done t=$(( $(date +%s) - start ))"
