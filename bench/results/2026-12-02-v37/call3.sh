#!/usr/bin/env bash
# v37 call 3 (carry [".carry/z62"]: branch sm90-split-files 89356bc, sm_90a): the new few-waves
# threshold (NVFP4 wgmma from 22 rows below kSm90WidthSplitMinWaves) and the check_problem fix.
# 1. The whole test binary, EP apart, 8 shards, nothing beside it.
# 2. A/B: the default (qwen3-30b on the fast path to 21 rows) against "old"
#    (FP4MOE_SM90_MIN_ROWS=19: v36's threshold at qwen3-30b's waves) at qwen3-30b T = 304-352,
#    both quantizations; round 1 with --check.
set -u
source scripts/device_lib.sh
unxz .carry/z62/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z62/cli.xz .carry/bin/fp4moe_def
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
env_variant old .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=19"
ab_rounds 390 420 "def old" "qwen3-30b:w4a16:304,320,336,352 qwen3-30b:w4a4:304,320,336,352"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report def
