#!/usr/bin/env bash
# v77: where the fast path's warps spend a kernel at small T (carry .carry/lw: main's CLI, sm_90a).
# The question: how much of a short-K GEMM's samples fall outside its k loop (the CTA's setup:
# slot search, row tables, first loads; and its epilogue). GEMM 2 (K = I) reads DRAM at 54-79% of
# peak at these points against GEMM 1's 60-85% (v55, v61). Per case, one forward's two fast-path
# GEMMs under ncu (SourceCounters, WarpStateStats, SpeedOfLight, LaunchStats, Occupancy), then
# scripts/ncu_source_top.py --regions on each kernel: the samples before the first HMMA, between
# the first and last, and after the last.
set -u
source scripts/device_lib.sh
[ -x .carry/bin/fp4moe ] || unxz .carry/lw/cli.xz .carry/bin/fp4moe || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $OUT/st
for case in ${CASES:-kimi-k2@8 qwen3-30b@32 deepseek-v3@128}; do
  ok ${STOP_S:-330} || break
  IFS=@ read m tok <<< "$case"
  rep=$OUT/st/$m-$tok
  timeout ${CASE_S:-150} ncu --clock-control none -k regex:sm80_grouped_gemm --launch-count 2 \
    --section WarpStateStats --section SourceCounters --section SpeedOfLight --section LaunchStats \
    --section Occupancy -f -o $rep \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --warmup 0 --warmup-ms 0 --sets 1 --copies 1 \
    --no-check --no-ceilings --no-baseline > $rep.log 2>&1
  echo "== $m T=$tok rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $rep.ncu-rep --page details --print-units base > $rep-details.txt 2>&1
  grep -E "sm80_grouped_gemm|Duration|DRAM Throughput|Waves Per SM|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Achieved Occupancy" $rep-details.txt | head -30
  ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep.csv 2>> $rep.log
  for id in 0 1; do
    python3 scripts/ncu_source_top.py $rep.csv --kernel $id --top 8 --regions > $rep-k$id-top.txt 2>&1
    echo "-- kernel $id"; sed -n '/^regions/,$p' $rep-k$id-top.txt | head -5
  done
done
rm -f $OUT/st/*.csv
(cd $OUT && tar czf st.tgz st && rm -rf st)
echo "t=$(( $(date +%s) - start ))"
