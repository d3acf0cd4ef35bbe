#!/usr/bin/env bash
# v39 call 4 (carry [".carry/z70"]): the hang found (CTA 0's status vote ran in lane 0 only, so
# CTA 0 never reached the first grid barrier; call 3's watchdog saw 131 of 132 CTAs there).
# The new tests and the T <= 8 conformance cases, then the one-kernel layer against the chain
# at T = 1 (FP4MOE_DECODE_LAYER=1 / 0, alternated processes), then kimi-k2 / deepseek-v3.
set -u
source scripts/device_lib.sh
unxz .carry/z70/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z70/cli.xz .carry/bin/fp4moe_main
timeout 150 stdbuf -oL .carry/bin/fp4moe_tests \
  --gtest_filter='CudaLayer.*:CudaLayerConformance.MatchesReference/*T1:CudaLayerConformance.MatchesReference/*T7' \
  > $OUT/tests1.log 2>&1
rc=$?
echo "tests rc=$rc t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|^\[==========|Failure" $OUT/tests1.log | head -30
grep -E "Failure" -A6 $OUT/tests1.log | head -60
[ $rc = 124 ] && exit 0
env_variant one .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=1"
env_variant chain .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=0"
FP4MOE_LOG=1 timeout 40 .carry/bin/fp4moe_one bench --model qwen3-30b --tokens 1 --iters 20 --check --no-baseline --no-ceilings 2>&1 | grep -E "decode layer|PASS|FAIL|^ +1 " | head
ab_rounds 330 390 "one chain" "qwen3-30b:w4a16:1 qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1 qwen3-30b:w4a4:1"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report chain
for mq in kimi-k2:w4a16 deepseek-v3:w4a4; do
  ok 450 || break
  IFS=: read -r m q <<< "$mq"
  timeout 62 .carry/bin/fp4moe_one bench --model $m --quant $q --tokens 1 --check --no-baseline > $OUT/t1-$m-$q-one.txt 2>&1
  echo "one $m $q: $(grep -E '^ +1 ' $OUT/t1-$m-$q-one.txt | tr -s ' ')"
done
echo "end t=$(( $(date +%s) - start ))"
