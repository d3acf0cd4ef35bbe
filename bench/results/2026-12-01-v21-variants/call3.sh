#!/usr/bin/env bash
# v21 call 3: the final code (tile rule at 8%, column skip; dead rows still zero-filled): targeted tests, then the table rows of qwen3-235b, qwen3-30b, gpt-oss-120b.
set -u
start=$(date +%s)
Z=.carry/z14
gunzip -c $Z/fp4moe_tests.gz > $Z/t && gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/t $Z/b
mkdir -p $OUT/r
F='CudaGemmSm80Tiles*:CudaGemmCases/*fast*:CudaGemmCases/*sm90*:CudaGemmCases/*decode*:CudaGemmConfig*:CudaLayer*'
for i in 0 1 2 3; do
  ( GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 90 $Z/t --gtest_filter="$F" > $OUT/r/t$i.log 2>&1; echo "rc=$?" >> $OUT/r/t$i.log ) &
done
wait
echo "t=$(( $(date +%s) - start )) s after tests"
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
tab() {  # preset timeout
  local m=$1 to=$2
  left=$(( 540 - ($(date +%s) - start) )); [ $left -lt $to ] && to=$left
  [ $to -gt 20 ] || return
  timeout $to $Z/b bench --all --model $m --check --json $OUT/$m.json > $OUT/r/$m.txt 2>&1; echo "rc=$?" >> $OUT/r/$m.txt
  echo "t=$(( $(date +%s) - start )) s after $m"
}
tab qwen3-235b 220
tab gpt-oss-120b 150
tab qwen3-30b 150
for f in $OUT/r/t*.log; do echo "== $f: $(grep -E '^\[  (PASSED|FAILED)  \]|^rc=' $f | tr '\n' ' ')"; grep -E '^\[  FAILED  \]' $f | head; done
for f in $OUT/r/q*.txt $OUT/r/g*.txt; do echo "== $f"; grep -E "ceilings|^ +[0-9]+ |rc=|FAIL" $f | cut -c1-120; done
cd $OUT && tar czf r.tgz r
