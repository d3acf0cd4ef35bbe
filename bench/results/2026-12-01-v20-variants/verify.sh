#!/usr/bin/env bash
# The whole suite, the sanitizers on the split, and --check, on branch sm90-split-pdl's binaries.
set -u
start=$(date +%s)
Z=$(dirname "$0"); mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
mkdir -p $OUT/tests $OUT/py $OUT/r
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=300 bash scripts/gpu_suite.sh tests > $OUT/tests/stdout.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=300 bash scripts/gpu_suite.sh python > $OUT/py/stdout.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
F='CudaGemmSm90.*Width*:CudaGemmCases/CudaGemm.MatchesHost/*split*sm90'
for tool in memcheck racecheck; do
  ( timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 .carry/bin/fp4moe_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/r/$tool.log 2>&1; echo "rc=$?" >> $OUT/r/$tool.log ) &
done
wait
echo "t=$(( $(date +%s) - start )) s after sanitizers"
timeout 90 .carry/bin/fp4moe bench --model kimi-k2 --tokens 2048,4096 --check --no-baseline > $OUT/r/check-kimi.txt 2>&1; echo "rc=$?" >> $OUT/r/check-kimi.txt
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; sed -n '/==== GPU suite summary/,$p' $OUT/$d/stdout.txt; done
for f in $OUT/r/*; do echo "== $f"; tail -n 4 $f; done
