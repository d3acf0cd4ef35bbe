#!/usr/bin/env bash
# v24 call 4: the fast path with more k-blocks per CTA barrier. Tests (fast-path GEMM cases, tiles,
# layer, edge) on p4 and p3b; then A/B base (main ad06bcc) | p4 (4 per barrier at 8-token tiles,
# 8 stages) | p3 (3 at 8-token tiles) | p3b (3 at 8 and 16-token tiles).
set -u
start=$(date +%s)
Z=.carry/z24; mkdir -p $OUT/t $OUT/ab
for v in main p4 p3 p3b; do gunzip -c $Z/$v.gz > $Z/$v && chmod +x $Z/$v; done
mv $Z/main $Z/base
for v in p4 p3b; do gunzip -c $Z/${v}_tests.gz > $Z/${v}_t && chmod +x $Z/${v}_t; done
F='CudaGemmSm80Tiles/*:CudaGemmCases/*_fast:CudaLayer.*:CudaGemmEdge*'
for v in p4 p3b; do for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 150 $Z/${v}_t --gtest_filter="$F" --gtest_brief=1 > $OUT/t/$v-$i.log 2>&1 &
done; done
wait
echo "t=$(( $(date +%s) - start )) s after tests"
for v in p4 p3b; do echo "$v: $(cat $OUT/t/$v-*.log | grep -E '^\[  (PASSED|FAILED)  \]' | tr '\n' ' ')"; done
grep -h 'FAILED  \] [A-Z]' $OUT/t/*.log | head -20
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep args...
  local n=$1 v=$2 rep=$3; shift 3
  ok 500 || return
  timeout 50 $Z/$v bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
timeout 40 $Z/p3b bench --model qwen3-235b --tokens 32,128 --check --no-baseline --no-ceilings --iters 10 > $OUT/chk.txt 2>&1; echo "chk p3b rc=$?"
for rep in 1 2; do
  for v in base p4 p3 p3b; do run kimi $v $rep --model kimi-k2 --tokens 32,128,512; done
  for v in p3b p3 p4 base; do run q235 $v $rep --model qwen3-235b --tokens 32,128; done
done
for v in base p4 p3 p3b; do run gpt $v 1 --model gpt-oss-120b --tokens 32,128; done
echo "t=$(( $(date +%s) - start )) s"
grep -E "PASS|FAIL" $OUT/chk.txt | cut -c1-160 | head -5
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab t chk.txt
