#!/usr/bin/env bash
# v37 call 4 (carry [".carry/z63"]: branch sm90-split-files as it merges, sm_90a test binary):
# the whole test binary, EP apart, 8 shards, nothing beside it.
set -u
source scripts/device_lib.sh
unxz .carry/z63/tests.xz .carry/bin/fp4moe_tests
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
