#!/usr/bin/env bash
# v40 call 3 (carry [".carry/z74"]): the stamps under FP4MOE_LAYER_PROBE: 0 as built, 1 the
# consumers skip the weight decode and MMAs (the copies alone), 2 the producer issues no copies
# (the consumers' work alone, on stale stages). Results of 1 and 2 are garbage (their checks fail).
set -u
source scripts/device_lib.sh
unxz .carry/z74/cli.xz .carry/bin/fp4moe_main
for probe in 0 1 2; do
for spec in qwen3-30b:w4a16 kimi-k2:w4a16; do
  IFS=: read -r model q <<< "$spec"
  FP4MOE_LAYER_PROBE=$probe FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_TRACE=$OUT/trace-$model-p$probe.txt timeout 60 .carry/bin/fp4moe_main bench --model $model \
    --quant $q --tokens 1 --iters 40 --check --no-baseline --no-ceilings > $OUT/bench-$model-p$probe.txt 2>&1
  echo "$model probe $probe rc=$? $(grep -A1 ' tokens  forward' $OUT/bench-$model-p$probe.txt | tail -1 | cut -c1-60)"
done
done
python3 scripts/layer_trace.py $OUT/trace-*.txt
