#!/usr/bin/env bash
# v39 call 1 (carry [".carry/z67"]: the one-kernel layer's test binary and CLI, sm_90a):
# the new tests and the T <= 8 conformance cases, then the one-kernel layer against the chain
# at T = 1 (FP4MOE_DECODE_LAYER=1 / 0, alternated processes), then kimi-k2 / deepseek-v3 once each.
set -u
source scripts/device_lib.sh
unxz .carry/z67/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z67/cli.xz .carry/bin/fp4moe_main
timeout 200 .carry/bin/fp4moe_tests \
  --gtest_filter='CudaLayer.OneKernel*:CudaLayer.OneToken*:CudaLayerConformance.MatchesReference/*T1:CudaLayerConformance.MatchesReference/*T7' \
  > $OUT/tests1.log 2>&1
echo "tests rc=$? t=$(( $(date +%s) - start ))"
grep -E "^\[  FAILED|^\[  PASSED|^\[==========|Failure|error" $OUT/tests1.log | head -30
grep -E "SKIPPED" $OUT/tests1.log | head -5
env_variant one .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=1"
env_variant chain .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=0"
FP4MOE_LOG=1 timeout 40 .carry/bin/fp4moe_one bench --model qwen3-30b --tokens 1 --iters 20 --check --no-baseline --no-ceilings 2>&1 | grep -E "decode layer|PASS|FAIL|^ +1 " | head
ab_rounds 380 440 "one chain" "qwen3-30b:w4a16:1 qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1 qwen3-30b:w4a4:1"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report chain
for b in one chain; do
  for mq in kimi-k2:w4a16 deepseek-v3:w4a4; do
    ok 560 || break
    IFS=: read -r m q <<< "$mq"
    timeout 62 .carry/bin/fp4moe_$b bench --model $m --quant $q --tokens 1 --check --no-baseline > $OUT/t1-$m-$q-$b.txt 2>&1
    echo "$b $m $q: $(grep -E '^ +1 ' $OUT/t1-$m-$q-$b.txt | tr -s ' ') $(grep -cE 'PASS' $OUT/t1-$m-$q-$b.txt)"
  done
done
echo "end t=$(( $(date +%s) - start ))"
