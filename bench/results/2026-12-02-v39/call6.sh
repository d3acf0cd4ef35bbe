#!/usr/bin/env bash
# v39 call 6 (carry [".carry/z71"]): where the one-kernel layer's warps wait (call 5: the kernel
# alone 33 us at qwen3-30b T = 1, DRAM 13% of peak): ncu's source page with warp-state samples.
set -u
source scripts/device_lib.sh
unxz .carry/z71/cli.xz .carry/bin/fp4moe_main
FP4MOE_DECODE_LAYER=1 timeout 150 ncu --clock-control none -k regex:decode_layer -c 1 --set full --import-source no \
  -o $OUT/layer .carry/bin/fp4moe_main bench --model qwen3-30b --tokens 1 --iters 2 --warmup 1 --no-check --no-baseline \
  --no-ceilings > $OUT/ncu.log 2>&1
echo "ncu rc=$? t=$(( $(date +%s) - start ))"
ncu --import $OUT/layer.ncu-rep --page source --print-source sass --csv > $OUT/layer.csv 2>/dev/null
python3 scripts/ncu_source_top.py $OUT/layer.csv --top 25 2>&1 | head -70
ncu --import $OUT/layer.ncu-rep --page details --section WarpStateStats --section MemoryWorkloadAnalysis 2>/dev/null | grep -vE "^\s*$|----" | head -50
rm -f $OUT/layer.csv
echo "end t=$(( $(date +%s) - start ))"
