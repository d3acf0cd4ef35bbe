#!/usr/bin/env bash
# Call 3 (one H200): the decode kernels' L2 bulk prefetch (FP4MOE_DECODE_PREFETCH k-blocks ahead) - ncu, A/B, tests.
set -u
start=$(date +%s)
Z=.carry/z8; R=$OUT/r; mkdir -p $R/ab $R/ncu
gunzip -c $Z/fp4moe_tests.gz > $Z/t && gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/t $Z/b
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for pf in 0 8; do
  FP4MOE_DECODE_PREFETCH=$pf timeout 40 ncu --clock-control none -k regex:decode_grouped --launch-count 2 \
    --section SpeedOfLight --section Occupancy --csv --print-units base \
    $Z/b bench --model kimi-k2 --experts 64 --tokens 1 --iters 1 --warmup 0 --sets 1 --no-check --no-ceilings --no-baseline > $R/ncu/pf$pf.csv 2> $R/ncu/pf$pf.err
done
echo "t=$(( $(date +%s) - start )) s after ncu"
run() {  # model pf rep
  ok 330 || return
  FP4MOE_DECODE_PREFETCH=$2 timeout 60 $Z/b bench --model $1 --tokens 1,4 --iters 200 --no-check --no-baseline --no-ceilings > $R/ab/$1-pf$2-$3.txt 2>&1
}
for pf in 0 4 8 16; do
  for m in kimi-k2 qwen3-30b gpt-oss-120b qwen3-235b; do run $m $pf 1; done
done
echo "t=$(( $(date +%s) - start )) s after ab"
F='CudaGemm*decode*:*CudaLayerConformance*T1*:*CudaLayerConformance*T8*:-*full_*'
( FP4MOE_DECODE_PREFETCH=8 timeout 100 $Z/t --gtest_filter="$F" > $R/tests-pf8.log 2>&1; echo "rc=$?" >> $R/tests-pf8.log ) &
( FP4MOE_DECODE_PREFETCH=3 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $Z/t --gtest_filter='CudaGemm*decode*' --gtest_brief=1 > $R/memcheck.log 2>&1; echo "rc=$?" >> $R/memcheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s"
for f in $R/tests-*.log $R/memcheck.log; do echo "== $f"; grep -E "FAILED" $f | head; tail -3 $f; done
cd $R/ncu && for f in *.csv; do echo "== $f"; grep -E '"(Duration|DRAM Throughput|Achieved Occupancy)"' $f | awk -F'","' '{print $1, $(NF-2), $NF}' | sed 's/"//g'; done
cd $R/ab && for f in *; do printf "%-28s %s\n" $f "$(grep -E '^ +(1|4) ' $f | awk '{printf "%s ", $2}')"; done
cd $OUT && tar czf r.tgz r && rm -rf r
