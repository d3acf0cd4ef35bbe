#!/usr/bin/env bash
# Call 2 (one H200): the ring with the largest carve-out - ncu of the decode kernels per variant, timings, tests, racecheck.
set -u
start=$(date +%s)
Z=.carry/z7; R=$OUT/r; mkdir -p $R/ab $R/ncu
gunzip -c $Z/fp4moe_tests.gz > $Z/t && gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/t $Z/b
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for v in "r0w50 0 50" "r8w16 8 16" "r8w24 8 24" "r8w50 8 50" "r4w50 4 50"; do
  set -- $v; ok 150 || break
  FP4MOE_DECODE_RING=$2 FP4MOE_DECODE_WARPS=$3 timeout 60 ncu --clock-control none -k regex:decode_grouped --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --csv --print-units base \
    $Z/b bench --model kimi-k2 --experts 64 --tokens 1 --iters 1 --warmup 0 --sets 1 --no-check --no-ceilings --no-baseline > $R/ncu/$1.csv 2> $R/ncu/$1.err
done
echo "t=$(( $(date +%s) - start )) s after ncu"
run() {  # model variant rep ring warps
  ok 330 || return
  FP4MOE_DECODE_RING=$4 FP4MOE_DECODE_WARPS=$5 timeout 60 $Z/b bench --model $1 --tokens 1,4 --iters 200 --no-check --no-baseline --no-ceilings > $R/ab/$1-$2-$3.txt 2>&1
}
for v in "r0w50 0 50" "r8w16 8 16" "r8w24 8 24" "r4w50 4 50"; do
  set -- $v
  for m in kimi-k2 qwen3-30b; do run $m $1 1 $2 $3; done
done
echo "t=$(( $(date +%s) - start )) s after ab"
F='CudaGemm*decode*:*CudaLayerConformance*T1*:*CudaLayerConformance*T8*:CudaGemmConfig*:-*full_*'
( timeout 150 $Z/t --gtest_filter="$F" > $R/tests-r8.log 2>&1; echo "rc=$?" >> $R/tests-r8.log ) &
( FP4MOE_DECODE_RING=4 timeout 150 $Z/t --gtest_filter="$F" > $R/tests-r4.log 2>&1; echo "rc=$?" >> $R/tests-r4.log ) &
( timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $Z/t --gtest_filter='*MatchesHost/decode_nvfp4_decode:*MatchesHost/decode_mxfp4_swiglu_bias_decode:*MatchesHost/nvfp4_silu_decode' --gtest_brief=1 > $R/racecheck.log 2>&1; echo "rc=$?" >> $R/racecheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s"
for f in $R/tests-r*.log $R/racecheck.log; do echo "== $f"; grep -E "FAILED" $f | head; tail -3 $f; done
cd $R/ncu && for f in *.csv; do echo "== $f"; grep -E '"(Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit Shared Mem|Block Limit Registers|Registers Per Thread|Dynamic Shared Memory Per Block|Driver Shared Memory Per Block|Shared Memory Configuration Size|Grid Size|Block Size|Memory Throughput)"' $f | awk -F'","' '{print $1, $(NF-2), $NF}' | sed 's/"//g' | head -30; done
cd $R/ab && for f in *; do printf "%-28s %s\n" $f "$(grep -E '^ +(1|4) ' $f | awk '{printf "%s ", $2}')"; done
cd $OUT && tar czf r.tgz r && rm -rf r
