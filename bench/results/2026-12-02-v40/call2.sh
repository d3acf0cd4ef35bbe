#!/usr/bin/env bash
# v40 call 2 (carry [".carry/z73"]): the stamps again with summed cycles (thread 0's waits for
# stages, meetings, epilogues; the producer's waits for free stages and its copies' issue).
set -u
source scripts/device_lib.sh
unxz .carry/z73/cli.xz .carry/bin/fp4moe_main
for spec in qwen3-30b:w4a16 kimi-k2:w4a16; do
  IFS=: read -r model q <<< "$spec"
  FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_TRACE=$OUT/trace-$model-$q.txt timeout 60 .carry/bin/fp4moe_main bench --model $model \
    --quant $q --tokens 1 --iters 40 --check --no-baseline --no-ceilings > $OUT/bench-$model-$q-layer.txt 2>&1
  echo "$model $q layer rc=$? $(grep -A1 ' tokens  forward' $OUT/bench-$model-$q-layer.txt | tail -1)"
done
python3 scripts/layer_trace.py $OUT/trace-*.txt
