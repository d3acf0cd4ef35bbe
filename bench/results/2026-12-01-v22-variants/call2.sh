#!/usr/bin/env bash
# v22 call 2: the whole suite and python on the final binary (template route, MX threshold 24, big-gate cases); memcheck of the big-gate cases; A/B act1 | final, and the MX threshold.
set -u
start=$(date +%s)
Z=.carry/z17; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
gunzip -c $Z/act1.gz > $Z/act1 && chmod +x $Z/act1
mkdir -p $OUT/tests $OUT/py $OUT/ab $OUT/r
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=260 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=260 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
( timeout 250 compute-sanitizer --tool memcheck --error-exitcode 9 .carry/bin/fp4moe_tests --gtest_filter='*big_gates*:-*_3ctas*:*naive*' --gtest_brief=1 > $OUT/r/memcheck.log 2>&1; echo "rc=$?" >> $OUT/r/memcheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
B=.carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep binary args...
  local n=$1 v=$2 rep=$3 b=$4; shift 4
  ok 550 || return
  timeout 60 $b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  run q30 act1 $rep $Z/act1 --model qwen3-30b --tokens 512,2048,8192
  run q30 final $rep $B --model qwen3-30b --tokens 512,2048,8192
  run gpt final $rep $B --model gpt-oss-120b --tokens 2048,8192
  run gpt act1 $rep $Z/act1 --model gpt-oss-120b --tokens 2048,8192
  for mx in 16 20 24; do
    ok 550 && FP4MOE_SM90_MIN_ROWS_MX=$mx timeout 60 $B bench --model gpt-oss-120b --tokens 512,576,640,704,768 --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/gptmx-mx$mx-$rep.txt 2>&1
  done
done
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; cat $OUT/$d/summary-*.txt 2>/dev/null | tail -12; done
grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|^rc=' $OUT/r/memcheck.log
python3 scripts/ab_summary.py $OUT/ab --base act1
python3 scripts/ab_summary.py $OUT/ab --base mx24
cd $OUT && tar czf all.tgz ab r tests py *.txt
