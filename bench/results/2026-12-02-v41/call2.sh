#!/usr/bin/env bash
# v41 call 2: v38's prepared sweep (2026-12-02-v38/prepared-sweep.sh, part 1), on main d2f1719's
# CLI: ncu per-kernel times of one forward at each forced slice count (FP4MOE_DECODE_SPLITS; 0 =
# the rule), both GEMMs taking the forced count. Columns: the decode kernels' µs in launch order.
set -u
source scripts/device_lib.sh
unxz .carry/$1/cli.xz .carry/bin/fp4moe
mkdir -p $OUT/c2
prof() {  # prof NAME "ENV" MODEL T
  env $2 timeout 70 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .carry/bin/fp4moe bench --model $3 --tokens $4 --iters 1 --copies 1 --no-check --no-ceilings --no-baseline \
    > $OUT/c2/sweep-$1.csv 2>/dev/null
  echo "$1: $(python3 scripts/ncu_breakdown.py $OUT/c2/sweep-$1.csv | grep -E 'decode|sm80' | awk '{print $NF == "us" ? $(NF-1) : $NF}' | tr '\n' ' ') t=$(( $(date +%s) - start ))"
}
for mt in qwen3-235b:1 gpt-oss-120b:1 qwen3-30b:1 qwen3-30b:8 qwen3-235b:8 kimi-k2:1; do
  IFS=: read -r m t <<< "$mt"
  for s in 0 2 3 4 6 8 12 16; do
    ok 470 || break 2
    prof "$m-T$t-s$s" "FP4MOE_DECODE_SPLITS=$s" $m $t
  done
done
python3 scripts/ncu_breakdown.py $OUT/c2/sweep-qwen3-235b-T1-s0.csv
(cd $OUT && tar czf c2.tgz c2 && rm -rf c2)
