#!/usr/bin/env bash
# v23 call 2: GEMM / layer GPU tests on main 8c59620 (the folded scale as IMAD); then A/B of the weight
# decode's shifts as IMAD.HI in the sm80 fast path: base (main) | shr1 (8-token tiles) | shr2 (<= 16) | shr4 (all).
set -u
start=$(date +%s)
Z=.carry/z22; mkdir -p $OUT/t $OUT/ab
gunzip -c $Z/fp4moe_tests.gz > $Z/tests && chmod +x $Z/tests
for v in base shr1 shr2 shr4; do gunzip -c $Z/$v.gz > $Z/$v && chmod +x $Z/$v; done
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
F='CudaGemmActivation*:CudaGemmCases/*:Kernels/*:CudaGemmSm90*:CudaGemmSm80Tiles/*:CudaLayer.*:CudaGemmEdge*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 150 $Z/tests --gtest_filter="$F" --gtest_brief=1 > $OUT/t/shard-$i.log 2>&1 &
done
wait
echo "t=$(( $(date +%s) - start )) s after tests"
grep -hE '^\[  (PASSED|FAILED|SKIPPED)  \]' $OUT/t/shard-*.log | sort | uniq -c
grep -h 'FAILED  \] [A-Z]' $OUT/t/shard-*.log | head -20
run() {  # name variant rep args...
  local n=$1 v=$2 rep=$3; shift 3
  ok 560 || return
  timeout 60 $Z/$v bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
timeout 40 $Z/shr4 bench --model qwen3-30b --tokens 8,64,128 --check --no-baseline --no-ceilings --iters 10 > $OUT/chk-q30.txt 2>&1; echo "chk shr4 q30 rc=$?"
for rep in 1 2; do
  for v in base shr1 shr2 shr4; do run q30 $v $rep --model qwen3-30b --tokens 8,32,64,128; done
  for v in shr4 shr2 shr1 base; do run kimi $v $rep --model kimi-k2 --tokens 8,32,128,512; done
  for v in base shr1 shr2 shr4; do run gpt $v $rep --model gpt-oss-120b --tokens 32,128,256; done
done
echo "t=$(( $(date +%s) - start )) s"
grep -E "PASS|FAIL" $OUT/chk-q30.txt | head -5
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab t chk-q30.txt
