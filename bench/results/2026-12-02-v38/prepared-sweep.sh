#!/usr/bin/env bash
# Prepared for the next session (carry a fresh sm_90a CLI as .carry/zN/cli.xz; set CLI below):
# ~400 s on one H200.
# 1. The decode kernels at each forced slice count (FP4MOE_DECODE_SPLITS), ncu per-kernel times of
#    one forward: where the rule's choice (by whole waves, cost 4) stands against the best count
#    per GEMM (both GEMMs take the forced count; the table shows each GEMM's time).
# 2. The fast path's waves and DRAM rate at qwen3-30b T = 32 / 128 (GEMM 1 2.0 and GEMM 2 2.7
#    waves of 5 CTAs per SM at T = 32 by the upper bound): is the last partial wave the cost?
set -u
source scripts/device_lib.sh
CLI=${CLI:-.carry/z67/cli.xz}
unxz "$CLI" .carry/bin/fp4moe
prof() {  # prof NAME "ENV" MODEL T
  env $2 timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .carry/bin/fp4moe bench --model $3 --tokens $4 --iters 1 --copies 1 --no-check --no-ceilings --no-baseline \
    > $OUT/sweep-$1.csv 2>/dev/null
  echo "$1: $(python3 scripts/ncu_breakdown.py $OUT/sweep-$1.csv | grep -E 'decode|sm80' | awk '{print $NF == "us" ? $(NF-1) : $NF}' | tr '\n' ' ')"
}
for mt in qwen3-30b:1 qwen3-235b:1 gpt-oss-120b:1 qwen3-30b:3 gpt-oss-120b:6 qwen3-30b:8; do
  IFS=: read -r m t <<< "$mt"
  for s in 0 2 3 4 6 8 12 16; do
    ok 300 || break 2
    prof "$m-T$t-s$s" "FP4MOE_DECODE_SPLITS=$s" $m $t
  done
done
echo "sweep t=$(( $(date +%s) - start ))"
for t in 32 128; do
  ok 380 || break
  timeout 90 ncu --clock-control none --kernel-name regex:sm80_grouped_gemm --launch-count 4 \
    --metrics gpu__time_duration.sum,launch__waves_per_multiprocessor,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,launch__grid_size,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv --print-units base .carry/bin/fp4moe bench --model qwen3-30b --tokens $t --iters 1 --copies 1 --no-check \
    --no-ceilings --no-baseline > $OUT/fast-T$t.csv 2>/dev/null
  echo "== fast path qwen3-30b T=$t"; grep -E '"(gpu__time|launch__|dram__|sm__warps)' $OUT/fast-T$t.csv | \
    awk -F'","' '{print $(NF-2), $NF}' | tr -d '"' | tail -16
done
echo "end t=$(( $(date +%s) - start ))"
