#!/usr/bin/env bash
# v21 call 1: the sm80 token-tile rule and the n8-column skip: targeted tests, memcheck, --check, A/B against main.
set -u
start=$(date +%s)
Z=.carry/z12; mkdir -p .carry/bin
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && gunzip -c $Z/base.gz > $Z/base && chmod +x .carry/bin/* $Z/base
mkdir -p $OUT/tests $OUT/ab $OUT/r
T=.carry/bin/fp4moe_tests; B=.carry/bin/fp4moe
F='CudaGemmSm80Tiles*:CudaGemmCases/*fast*:CudaGemmCases/*sm90*:CudaGemmCases/*decode*:CudaGemmConfig*:CudaLayer*'
for i in 0 1 2 3; do
  ( GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 150 $T --gtest_filter="$F" > $OUT/tests/t$i.log 2>&1; echo "rc=$?" >> $OUT/tests/t$i.log ) &
done
( timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='CudaGemmSm80Tiles*' --gtest_brief=1 > $OUT/tests/memcheck.log 2>&1; echo "rc=$?" >> $OUT/tests/memcheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
for m in "qwen3-235b --tokens 128" "qwen3-235b --quant w4a4 --tokens 128" "gpt-oss-120b --tokens 256,512" "kimi-k2 --tokens 512"; do
  n=$(echo $m | tr ' ,' '__'); timeout 90 $B bench --model $m --check --no-baseline > $OUT/r/check-$n.txt 2>&1; echo "rc=$?" >> $OUT/r/check-$n.txt
done
echo "t=$(( $(date +%s) - start )) s after checks"
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep binary env args...
  local n=$1 v=$2 rep=$3 b=$4 e=$5; shift 5
  ok 560 || return
  env $e timeout 60 $b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  run q235 base $rep $Z/base X=1 --model qwen3-235b --tokens 64,128,256
  run q235 rule $rep $B X=1 --model qwen3-235b --tokens 64,128,256
  run q30 rule $rep $B X=1 --model qwen3-30b --tokens 64,128
  run q30 base $rep $Z/base X=1 --model qwen3-30b --tokens 64,128
  run kimi base $rep $Z/base X=1 --model kimi-k2 --tokens 128,256,512
  run kimi rule $rep $B X=1 --model kimi-k2 --tokens 128,256,512
  run gpt rule $rep $B X=1 --model gpt-oss-120b --tokens 256,512
  run gpt base $rep $Z/base X=1 --model gpt-oss-120b --tokens 256,512
  run ds base $rep $Z/base X=1 --model deepseek-v3 --tokens 128,256
  run ds rule $rep $B X=1 --model deepseek-v3 --tokens 128,256
done
run q235 t8 1 $B FP4MOE_SM80_TILE=8 --model qwen3-235b --tokens 64,128,256
run q235 t24 1 $B FP4MOE_SM80_TILE=24 --model qwen3-235b --tokens 64,128,256
run gpt t24 1 $B FP4MOE_SM80_TILE=24 --model gpt-oss-120b --tokens 256,512
run kimi t16 1 $B FP4MOE_SM80_TILE=16 --model kimi-k2 --tokens 128,256,512
run ds t8 1 $B FP4MOE_SM80_TILE=8 --model deepseek-v3 --tokens 128,256
run kimi t32 1 $B FP4MOE_SM80_TILE=32 --model kimi-k2 --tokens 128,256,512
run q235a4 base 1 $Z/base X=1 --model qwen3-235b --quant w4a4 --tokens 128,256
run q235a4 rule 1 $B X=1 --model qwen3-235b --quant w4a4 --tokens 128,256
echo "t=$(( $(date +%s) - start )) s"
for f in $OUT/tests/*.log; do echo "== $f: $(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|^rc=' $f | tr '\n' ' ')"; grep -E '^\[  FAILED  \]' $f | head; done
for f in $OUT/r/*; do echo "== $f"; grep -E "^ +[0-9]+ |rc=|check" $f | head -8; done
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab r tests
