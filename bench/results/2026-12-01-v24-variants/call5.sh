#!/usr/bin/env bash
# v24 call 5: the whole suite on main 432a785 (four k-blocks per barrier at 8-token tiles):
# the test binary, EP apart, 8 shards; pytest (the package built here) beside it.
set -u
start=$(date +%s)
Z=.carry/z25; mkdir -p .carry/bin .carry/include $OUT/tests $OUT/py
cp -r $Z/nlohmann .carry/include/
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=230 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=240 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s"
grep -h "^== " $OUT/tests.txt $OUT/py.txt
grep -h "FAILED  \] [A-Z]" $OUT/tests/tests-*.log | head -20
cd $OUT && tar czf all.tgz tests py *.txt
