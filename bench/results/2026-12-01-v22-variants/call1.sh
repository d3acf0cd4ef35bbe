#!/usr/bin/env bash
# v22 call 1: the activation's straight-line route. Targeted GPU tests, then A/B base (main 7058bce) | act.
set -u
start=$(date +%s)
Z=.carry/z16; mkdir -p .carry/bin
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
gunzip -c $Z/base.gz > $Z/base && chmod +x $Z/base
mkdir -p $OUT/t $OUT/ab $OUT/chk
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
F='CudaGemmActivation*:CudaGemmCases/*:Kernels/*:CudaGemmSm90*:CudaGemmSm80Tiles/*:CudaLayer.*:CudaGemmEdge*'
for i in 0 1 2 3 4 5 6 7; do
  CUDA_VISIBLE_DEVICES=0 GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 200 .carry/bin/fp4moe_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/t/shard-$i.log 2>&1 &
done
wait
echo "t=$(( $(date +%s) - start )) s after tests"
grep -hE '^\[  (PASSED|FAILED|SKIPPED)  \]|tests ran' $OUT/t/shard-*.log | sort | uniq -c
grep -h 'FAILED  \] [A-Z]' $OUT/t/shard-*.log | head -20
grep -h -A3 'CudaGemmActivation' $OUT/t/shard-*.log | grep -E "OK|FAIL|Failure|counts|expect|Which" | head
B=.carry/bin/fp4moe
run() {  # name variant rep binary args...
  local n=$1 v=$2 rep=$3 b=$4; shift 4
  ok 540 || return
  timeout 90 $b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
timeout 60 $B bench --model qwen3-30b --tokens 1,512,4096 --check --no-baseline --no-ceilings --iters 20 > $OUT/chk/q30.txt 2>&1; echo "chk q30 rc=$?"
timeout 60 $B bench --model gpt-oss-120b --tokens 1,2048 --check --no-baseline --no-ceilings --iters 20 > $OUT/chk/gpt.txt 2>&1; echo "chk gpt rc=$?"
echo "t=$(( $(date +%s) - start )) s after checks"
for rep in 1 2; do
  run q30 base $rep $Z/base --model qwen3-30b --tokens 1,8,512,2048,8192,16384
  run q30 act $rep $B --model qwen3-30b --tokens 1,8,512,2048,8192,16384
  run gpt act $rep $B --model gpt-oss-120b --tokens 1,2048,8192
  run gpt base $rep $Z/base --model gpt-oss-120b --tokens 1,2048,8192
  run q235 base $rep $Z/base --model qwen3-235b --tokens 512,2048,8192
  run q235 act $rep $B --model qwen3-235b --tokens 512,2048,8192
  run kimi act $rep $B --model kimi-k2 --tokens 1,2048,16384
  run kimi base $rep $Z/base --model kimi-k2 --tokens 1,2048,16384
done
for rep in 1 2; do
  for mx in 24 32; do
    ok 560 && FP4MOE_SM90_MIN_ROWS_MX=$mx timeout 60 $B bench --model gpt-oss-120b --tokens 512,640,768,896 --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/gptmx-mx$mx-$rep.txt 2>&1
  done
done
echo "t=$(( $(date +%s) - start )) s"
grep -E "PASS|FAIL" $OUT/chk/*.txt | head
python3 scripts/ab_summary.py $OUT/ab --base base
python3 scripts/ab_summary.py $OUT/ab --base mx32
cd $OUT && tar czf all.tgz ab t chk
