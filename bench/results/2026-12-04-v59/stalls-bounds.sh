#!/usr/bin/env bash
# v59 call 6: ncu stall samples and speed-of-light of rsws4's GEMM 1 (48-token, kimi-k2 T = 2048:
# the second sm90_rsws_gemm launch of a forward) in the bounds CLI (.carry/bd59) at
# FP4MOE_SM90_BOUND = 0 (main's kernels), 1 (no decode), 2 (no wgmma): what limits each.
set -u
source scripts/device_lib.sh
unxz .carry/bd59/cli.xz .carry/bin/fp4moe
for b in 0 1 2; do
  rep=$OUT/b$b
  FP4MOE_SM90_BOUND=$b timeout 90 ncu --clock-control none -k regex:sm90_rsws_gemm --launch-skip 1 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SchedulerStats --section SpeedOfLight \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
    -f -o $rep .carry/bin/fp4moe bench --model kimi-k2 --tokens 2048 --iters 1 --warmup 0 --sets 1 --no-check \
    --no-ceilings --no-baseline > $rep.log 2>&1
  echo "b$b rc=$?"
  ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep.csv 2>>$rep.log
  ncu --import $rep.ncu-rep --page details --csv > $rep-details.csv 2>>$rep.log
  grep -E '"(Duration|Issued Warp Per Scheduler|No Eligible|Eligible Warps Per Scheduler|DRAM Throughput|Compute \(SM\) Throughput)"|tensor_op|dram__|gpu__time' $rep-details.csv | awk -F'","' '{print $5" | "$13" = "$15}' | cut -c1-160
  python3 scripts/ncu_source_top.py $rep.csv --top 8 --regions | head -30
  rm -f $rep.ncu-rep; gzip $rep.csv
done
echo "t=$(( $(date +%s) - start ))"
