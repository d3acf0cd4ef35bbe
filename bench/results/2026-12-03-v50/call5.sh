#!/usr/bin/env bash
# v50 call 5 (carry [".carry/r50c"]; ~80 s): bench --warmup-ms on the GPU. CliBenchLayers'
# script (now with --warmup-ms 50), then kimi-k2 and deepseek-v3 T = 32 / 128 at 30 replays with
# --warmup-ms 1000, against call 4's 30 replays without (the GPU's first clocks) and 240 (the
# sustained ones).
set -u
source scripts/device_lib.sh
unxz .carry/r50c/cli.xz .carry/bin/fp4moe
cmake -DBIN=.carry/bin/fp4moe -DJSON=$OUT/layers-check.json -P cmake/check_bench_layers.cmake > $OUT/layers-check.txt 2>&1
echo "CliBenchLayers script rc=$? $(tail -1 $OUT/layers-check.txt)"
for m in kimi-k2 deepseek-v3; do
  timeout 100 .carry/bin/fp4moe bench --model $m --tokens 32,128 --iters 30 --warmup 5 --warmup-ms 1000 --no-check \
    --no-baseline --no-ceilings > $OUT/$m-warm1000.txt 2>&1
  echo "$m --warmup-ms 1000: $(grep -E '^ +(32|128) ' $OUT/$m-warm1000.txt | awk '{print "T="$1" "$2" us"}' | tr '\n' ' ')"
done
