#!/usr/bin/env bash
# v35 call 4 (carry [".carry/z53"]: the fold's CLI and test binary, sm_90a; ~520 s). rsws4's
# width split folded (Sm90Config::narrow_fold): the GEMM tests, memcheck of the width split
# test (folds included), the whole test binary (EP apart, 8 shards); then the layer unfolded
# (FP4MOE_SM90_FOLD=1, what main ran) against always folded (=8) at 11 points of 16-32 rows
# per expert, alternated.
set -u
source scripts/device_lib.sh
unxz .carry/z53/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z53/cli.xz .carry/bin/fp4moe_bin
env_variant nofold .carry/bin/fp4moe_bin "FP4MOE_SM90_FOLD=1"
env_variant fold .carry/bin/fp4moe_bin "FP4MOE_SM90_FOLD=8"
timeout 120 compute-sanitizer --tool memcheck .carry/bin/fp4moe_tests \
  --gtest_filter='CudaGemmSm90.WidthSplitAtEveryWidth' > $OUT/memcheck.log 2>&1 &
mc=$!
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
wait $mc
echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/memcheck.log) $(grep -E '^\[  (PASSED|FAILED)' $OUT/memcheck.log)"
echo "suite t=$(( $(date +%s) - start ))"
ab_rounds 430 470 "nofold fold" "qwen3-30b:w4a16:256,320,448 qwen3-235b:w4a16:256,512 deepseek-v3:w4a16:512,768 kimi-k2:w4a16:768,1024 gpt-oss-120b:w4a16:768,1024"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
python3 scripts/ab_summary.py $OUT/ab --base nofold
cd $OUT && tar czf ab.tgz ab && rm -rf ab
