#!/usr/bin/env bash
# v21 call 2: the whole suite on noz (tile rule at 8% + dead A rows not copied), then A/B: base (main), rule8 (the rule at 8%, zero-fill kept), noz.
set -u
start=$(date +%s)
Z=.carry/z13; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
for b in base rule8; do gunzip -c $Z/$b.gz > $Z/$b && chmod +x $Z/$b; done
mkdir -p $OUT/tests $OUT/py $OUT/ab $OUT/r
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=240 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=240 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
( timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .carry/bin/fp4moe_tests --gtest_filter='CudaGemmSm80Tiles*:CudaGemmCases/*fast*' --gtest_brief=1 > $OUT/r/memcheck.log 2>&1; echo "rc=$?" >> $OUT/r/memcheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
B=.carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep binary args...
  local n=$1 v=$2 rep=$3 b=$4; shift 4
  ok 560 || return
  timeout 60 $b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  run q235 base $rep $Z/base --model qwen3-235b --tokens 64,128,256
  run q235 noz $rep $B --model qwen3-235b --tokens 64,128,256
  run q235 rule8 $rep $Z/rule8 --model qwen3-235b --tokens 64,128,256
  run gpt rule8 $rep $Z/rule8 --model gpt-oss-120b --tokens 128,256,512
  run gpt noz $rep $B --model gpt-oss-120b --tokens 128,256,512
  run gpt base $rep $Z/base --model gpt-oss-120b --tokens 128,256,512
  run kimi base $rep $Z/base --model kimi-k2 --tokens 8,32,128,256,512
  run kimi noz $rep $B --model kimi-k2 --tokens 8,32,128,256,512
  run kimi rule8 $rep $Z/rule8 --model kimi-k2 --tokens 8,32,128,256,512
  run ds rule8 $rep $Z/rule8 --model deepseek-v3 --tokens 32,128,256
  run ds noz $rep $B --model deepseek-v3 --tokens 32,128,256
  run ds base $rep $Z/base --model deepseek-v3 --tokens 32,128,256
  run q30 noz $rep $B --model qwen3-30b --tokens 32,64,128
  run q30 base $rep $Z/base --model qwen3-30b --tokens 32,64,128
done
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; cat $OUT/$d/summary-*.txt 2>/dev/null | tail -12; done
grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|^rc=' $OUT/r/memcheck.log
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab r tests py *.txt
