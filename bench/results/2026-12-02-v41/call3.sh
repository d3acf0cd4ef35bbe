#!/usr/bin/env bash
# v41 call 3 (carry z78: main d2f1719's sm_90a test binary): the whole test binary, EP apart, 8
# shards; then pytest with the package built on the device (gpu_suite.sh python).
set -u
source scripts/device_lib.sh
unxz .carry/$1/tests.xz .carry/bin/fp4moe_tests
unxz .carry/$1/cli.xz .carry/bin/fp4moe
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
OUT=$OUT/py PYTHON_TIMEOUT=330 timeout 340 bash scripts/gpu_suite.sh python 2>&1 | tail -8
echo "python t=$(( $(date +%s) - start ))"
