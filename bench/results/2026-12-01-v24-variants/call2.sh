#!/usr/bin/env bash
# v24 call 2: racecheck of the CUDA tests (8 shards) on main ad06bcc; then a full bench (baseline,
# ceilings, --check, JSON) of the rows near the 90% target, a third machine's numbers.
set -u
start=$(date +%s)
Z=.carry/z24; mkdir -p .carry/bin $OUT/san $OUT/json $OUT/log
gunzip -c $Z/main_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/main.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
F='CudaGemmSm80Tiles/*:CudaGemmCases/*:CudaLayer.*:CudaCombine.*:CudaPermute.*:CudaQuantize.*:CudaRouting.*:CudaGemmEdge.*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 \
    .carry/bin/fp4moe_tests --gtest_filter="$F" > $OUT/san/racecheck-$i.log 2>&1 &
done
wait
for i in 0 1 2 3 4 5 6 7; do f=$OUT/san/racecheck-$i.log
  echo "== racecheck shard $i: $(grep -c '^\[       OK \]' $f) ok, $(grep -c '^\[  FAILED  \]' $f) failed lines, $(grep -E 'RACECHECK SUMMARY' $f | tail -1)"
done > $OUT/san.txt
echo "t=$(( $(date +%s) - start )) s after racecheck"
run() {  # name args...
  local n=$1; shift
  ok 540 || { echo "skip $n"; return; }
  timeout 75 .carry/bin/fp4moe bench "$@" --check --json $OUT/json/$n.json > $OUT/log/$n.txt 2>&1; echo "$n rc=$?"
}
run kimi-w4a16 --model kimi-k2 --tokens 8,32,128
run ds-w4a16 --model deepseek-v3 --tokens 8,32,128
run kimi-w4a4 --model kimi-k2 --quant w4a4 --tokens 8,32,128
run ds-w4a4 --model deepseek-v3 --quant w4a4 --tokens 8,32,128
run q235 --model qwen3-235b --tokens 32,128
echo "t=$(( $(date +%s) - start )) s"
grep -h "==" $OUT/san.txt | tail -10
for f in $OUT/log/*.txt; do echo "== $f"; grep -E "^ +[0-9]+ +[0-9.]+ " $f | tr -s ' ' | cut -c1-150; done
cd $OUT && tar czf all.tgz san json log san.txt
