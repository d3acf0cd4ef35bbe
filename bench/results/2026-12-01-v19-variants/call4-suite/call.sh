#!/usr/bin/env bash
# Call 4 (one H200): main 043d201 - the whole test binary (EP apart, 8 shards) and the Python suite at the same time.
set -u
start=$(date +%s)
Z=.carry/z9; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
mkdir -p $OUT/tests $OUT/py
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=320 bash scripts/gpu_suite.sh tests > $OUT/tests/stdout.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=320 bash scripts/gpu_suite.sh python > $OUT/py/stdout.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; sed -n '/==== GPU suite summary/,$p' $OUT/$d/stdout.txt; done
grep -h -E '^\[  FAILED  \]' $OUT/tests/stdout.txt | sort -u | head -20
