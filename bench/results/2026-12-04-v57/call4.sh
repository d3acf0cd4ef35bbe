#!/usr/bin/env bash
# v57 call 4 (carry .carry/r55 main's CLI, .carry/kp3 kpair's): ncu kernel times of one forward at
# kimi-k2 T = 16384 (kpair +0.6% / +0.9% there in calls 2 and 3), main against kpair: which launch loses.
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe_main
unxz .carry/kp3/cli.xz .carry/bin/fp4moe_kpair
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics=$metrics,sm__cycles_elapsed.avg.per_second
for v in main kpair; do
  f=$OUT/$v
  timeout 100 ncu --clock-control none --metrics $metrics --launch-skip 0 --launch-count 40 --csv --print-units base \
    .carry/bin/fp4moe_$v bench --model kimi-k2 --tokens 16384 --iters 1 --copies 1 --warmup-ms 0 --no-check \
    --no-ceilings --no-baseline > $f.csv 2> $f.err
  echo "== $v rc=$? t=$(( $(date +%s) - start ))"
  python3 scripts/ncu_breakdown.py $f.csv 2>&1 | tee $f.txt | head -14
done
