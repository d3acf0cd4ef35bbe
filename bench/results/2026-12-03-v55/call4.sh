#!/usr/bin/env bash
# v55 call 4 (carry [".carry/r55"]: main 181973f's CLI, sm_90a, stripped, xz). Where the
# narrow-width rsws4 kernels' warps stall at the table's weakest mid-T rows (call 3: 49-60%
# tensor pipe, 57% DRAM, 65% issue): ncu's warp-state samples per SASS instruction
# (SourceCounters) and the scheduler / warp-state sections, one launch each, full presets:
#   kimi-k2 T = 2048: GEMM 1 at 48 tokens (sm90_rsws_gemm<8, 1, 4, 0, 6>, the 2nd rsws launch),
#                     GEMM 2 at 48 tokens (<8, 0, 4, 0, 6>, the 5th);
#   qwen3-235b T = 512: GEMM 1 at 40 tokens (<8, 1, 4, 0, 5>, the 1st).
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe
mkdir -p $OUT/st
for case in kimi-k2@2048@1@g1 kimi-k2@2048@4@g2 qwen3-235b@512@0@g1; do
  ok 420 || break
  IFS=@ read m tok skip g <<< "$case"
  rep=$OUT/st/$m-$tok-$g
  timeout 150 ncu --clock-control none -k regex:sm90_rsws_gemm --launch-skip $skip --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SchedulerStats --section SpeedOfLight -f -o $rep \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --warmup 0 --warmup-ms 0 --sets 1 --copies 1 \
    --no-check --no-ceilings --no-baseline > $rep.log 2>&1
  echo "== $m T=$tok $g rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $rep.ncu-rep --page details --print-units base > $rep-details.txt 2>&1
  grep -E "sm90_rsws_gemm|Duration|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput" $rep-details.txt | head -14
  ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep.csv 2>> $rep.log
  python3 scripts/ncu_source_top.py $rep.csv --top 12 --regions > $rep-top.txt 2>&1
  head -60 $rep-top.txt
done
rm -f $OUT/st/*.ncu-rep.csv
(cd $OUT && tar czf st.tgz st && rm -rf st)
