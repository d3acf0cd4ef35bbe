#!/usr/bin/env bash
# v39 call 5 (carry [".carry/z71"]): x and h rows at their own strides in shared memory (call 4:
# deepseek-v3 W4A4 T = 7 declined, its h rows took x's stride); the one-kernel layer off by
# default (call 4: 57-63% slower than the chain at T = 1). Its tests, then ncu of the kernel
# alone at qwen3-30b T = 1 (FP4MOE_DECODE_LAYER=1).
set -u
source scripts/device_lib.sh
unxz .carry/z71/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z71/cli.xz .carry/bin/fp4moe_main
timeout 60 stdbuf -oL .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.OneKernel*:CudaLayer.OneToken*' > $OUT/tests1.log 2>&1
echo "tests rc=$? t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|^\[       OK|Failure" $OUT/tests1.log | head -20
FP4MOE_DECODE_LAYER=1 timeout 120 ncu --clock-control none -k regex:decode_layer -c 3 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__warps_active.avg.per_cycle_active,launch__grid_size,launch__registers_per_thread \
  .carry/bin/fp4moe_main bench --model qwen3-30b --tokens 1 --iters 2 --warmup 1 --no-check --no-baseline --no-ceilings > $OUT/ncu.txt 2>&1
echo "ncu rc=$? t=$(( $(date +%s) - start ))"
grep -E "decode_layer|gpu__time|dram__|sm__thr|warps_active|grid_size|registers|ERR|rror" $OUT/ncu.txt | head -30
echo "end t=$(( $(date +%s) - start ))"
