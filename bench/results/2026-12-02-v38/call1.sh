#!/usr/bin/env bash
# v38 call 1 (carry [".carry/z64"]: main fe04fb5, sm_90a test binary and CLI): the whole test
# binary, EP apart, 8 shards; pytest with the package built on the device; then, as time allows,
# per-kernel times (ncu) of qwen3-30b at T = 1 / 8 / 32 for the decode regime's plan.
set -u
source scripts/device_lib.sh
unxz .carry/z64/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z64/cli.xz .carry/bin/fp4moe
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
OUT=$OUT/py PYTHON_TIMEOUT=300 timeout 310 bash scripts/gpu_suite.sh python 2>&1 | tail -6
echo "python t=$(( $(date +%s) - start ))"
for T in 1 8 32; do
  ok 520 || break
  OUT=$OUT/prof BENCH_MODEL=qwen3-30b PROFILE_TOKENS=$T PROFILE_TIMEOUT=60 BUNDLE=0 bash scripts/gpu_suite.sh profile 2>&1 | grep -v "^==" | tail -12
done
echo "end t=$(( $(date +%s) - start ))"
