#!/usr/bin/env bash
# v38 call 2 (carry [".carry/z65"]: branch decode-fit's CLI, sm_90a). The decode kernels' K split
# at T = 1: main's rule (def) against a shorter K slice (mk2: FP4MOE_DECODE_MIN_KB=2, moves only
# qwen3-30b's GEMM 2: 3 -> 6 slices, one wave at half occupancy -> one full wave) and the split by
# whole waves of resident CTAs (fit4: FP4MOE_DECODE_FIT=4; qwen3-235b 8/6 -> 4/3 slices, kimi-k2
# GEMM 1 6 -> 3, gpt-oss-120b GEMM 1 8 -> 4: two waves -> one). Then ncu per-kernel times.
set -u
source scripts/device_lib.sh
unxz .carry/z65/cli.xz .carry/bin/fp4moe
env_variant def .carry/bin/fp4moe ""
env_variant mk2 .carry/bin/fp4moe "FP4MOE_DECODE_MIN_KB=2"
env_variant fit4 .carry/bin/fp4moe "FP4MOE_DECODE_FIT=4 FP4MOE_DECODE_MAX_SPLITS=16 FP4MOE_DECODE_MIN_KB=1"
ab_rounds 400 430 "def mk2 fit4" "qwen3-30b:w4a16:1 qwen3-30b:w4a4:1 qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1 kimi-k2:w4a16:1"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report def
for v in def fit4; do
  for m in qwen3-30b qwen3-235b; do
    ok 540 || break
    timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      .carry/bin/fp4moe_$v bench --model $m --tokens 1 --iters 1 --copies 1 --no-check --no-ceilings --no-baseline \
      > $OUT/prof-$v-$m.csv 2>/dev/null
    echo "== $v $m"; python3 scripts/ncu_breakdown.py $OUT/prof-$v-$m.csv | tail -6
  done
done
echo "end t=$(( $(date +%s) - start ))"
