#!/usr/bin/env bash
# v22 call 3: the whole suite and python on the final binary (5a7a3f6); memcheck of the big-gate and MX cases; then full JSON runs of three presets.
set -u
start=$(date +%s)
Z=.carry/z18; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
mkdir -p $OUT/tests $OUT/py $OUT/r $OUT/j
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=240 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=240 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
( timeout 230 compute-sanitizer --tool memcheck --error-exitcode 9 .carry/bin/fp4moe_tests --gtest_filter='*big_gates*:*mxfp4*:-*_3ctas*:*naive*:*Forced*' --gtest_brief=1 > $OUT/r/memcheck.log 2>&1; echo "rc=$?" >> $OUT/r/memcheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for m in qwen3-30b gpt-oss-120b qwen3-235b deepseek-v3; do
  ok 470 || break
  timeout 120 .carry/bin/fp4moe bench --all --model $m --check --json $OUT/j/2026-12-01-h200-v22-$m.json > $OUT/j/$m.txt 2>&1; echo "$m rc=$? t=$(( $(date +%s) - start ))"
done
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; cat $OUT/$d/summary-*.txt 2>/dev/null | tail -12; done
grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|^rc=' $OUT/r/memcheck.log
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}' | head -80
cd $OUT && tar czf all.tgz r tests py *.txt j
