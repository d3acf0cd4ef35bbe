#!/usr/bin/env bash
# v39 call 2 (carry [".carry/z68"]): call 1's one-kernel layer hung; the mbarriers now fenced
# to the async proxy after their init. First a watchdog build (a trap naming the wait after 1 s),
# then the normal build's tests, then the A/B against the chain at T = 1 if time is left.
set -u
source scripts/device_lib.sh
unxz .carry/z68/tests_wd.xz .carry/bin/fp4moe_tests_wd
unxz .carry/z68/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z68/cli.xz .carry/bin/fp4moe_main
timeout 90 .carry/bin/fp4moe_tests_wd --gtest_filter='CudaLayer.OneKernel*' > $OUT/tests_wd.log 2>&1
rc=$?
echo "watchdog tests rc=$rc t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|^\[       OK|Failure|not over|error" $OUT/tests_wd.log | head -30
[ $rc = 0 ] || exit 0
timeout 200 .carry/bin/fp4moe_tests \
  --gtest_filter='CudaLayer.*:CudaLayerConformance.MatchesReference/*T1:CudaLayerConformance.MatchesReference/*T7' \
  > $OUT/tests1.log 2>&1
echo "tests rc=$? t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|^\[==========|Failure" $OUT/tests1.log | head -30
env_variant one .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=1"
env_variant chain .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=0"
ab_rounds 430 500 "one chain" "qwen3-30b:w4a16:1 qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1 qwen3-30b:w4a4:1"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report chain
for b in one; do
  for mq in kimi-k2:w4a16; do
    ok 530 || break
    IFS=: read -r m q <<< "$mq"
    timeout 62 .carry/bin/fp4moe_$b bench --model $m --quant $q --tokens 1 --check --no-baseline > $OUT/t1-$m-$q-$b.txt 2>&1
    echo "$b $m $q: $(grep -E '^ +1 ' $OUT/t1-$m-$q-$b.txt | tr -s ' ')"
  done
done
echo "end t=$(( $(date +%s) - start ))"
