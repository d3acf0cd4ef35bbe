#!/usr/bin/env bash
# v38 call 3 (carry [".carry/z66"]: branch decode-fit with the split by whole waves as the rule,
# sm_90a test binary and CLI): the whole test binary, EP apart, 8 shards (with the new tests at
# every forced slice count: CudaGemmDecodeSplits, CudaLayer.OneTokenAtEverySliceCount); then the
# A/B at T = 1-6: the rule (def, wave cost 16) against wave cost 4 (c4) and the v37 rule (old).
set -u
source scripts/device_lib.sh
unxz .carry/z66/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z66/cli.xz .carry/bin/fp4moe
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
env_variant def .carry/bin/fp4moe ""
env_variant c4 .carry/bin/fp4moe "FP4MOE_DECODE_WAVE_COST=4"
env_variant old .carry/bin/fp4moe "FP4MOE_DECODE_WAVE_COST=0"
ab_rounds 480 510 "def c4 old" "qwen3-30b:w4a16:1,2,3,4,6 qwen3-235b:w4a16:1,2,3,4 gpt-oss-120b:w4a16:1,2,3,4,6"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report def
