#!/usr/bin/env bash
# v40 call 6 (carry [".carry/z77"]): stages of 32 k-blocks, two per consumer warp, their loads
# first (FP4MOE_LAYER_KPW=1: 16, one per warp, as before); the scale's multiply as an IMAD; the
# units' shares in 32 bits. The one-kernel tests at both, the stamps, A/B against the chain, then
# the whole GPU suite but the EP tests.
set -u
source scripts/device_lib.sh
unxz .carry/z77/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z77/cli.xz .carry/bin/fp4moe_main
for kpw in 2 1; do
  FP4MOE_LAYER_KPW=$kpw timeout 90 stdbuf -oL .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.OneKernel*:CudaLayer.OneToken*' > $OUT/tests-kpw$kpw.log 2>&1
  echo "tests kpw=$kpw rc=$? t=$(( $(date +%s) - start ))"
  grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests-kpw$kpw.log | head -10
done
for spec in qwen3-30b:w4a16 kimi-k2:w4a16; do
  IFS=: read -r model q <<< "$spec"
  FP4MOE_LOG=1 FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_TRACE=$OUT/trace-$model-$q.txt timeout 60 .carry/bin/fp4moe_main bench --model $model \
    --quant $q --tokens 1 --iters 40 --check --no-baseline --no-ceilings > $OUT/bench-$model-$q.txt 2>&1
  echo "$model $q rc=$? $(grep -A1 ' tokens  forward' $OUT/bench-$model-$q.txt | tail -1 | cut -c1-60) $(grep -oE 'PASS|FAIL' $OUT/bench-$model-$q.txt | head -1)"
  grep -m1 "decode layer T=" $OUT/bench-$model-$q.txt
done
python3 scripts/layer_trace.py $OUT/trace-*.txt 2>&1 | grep -vE "^ +(issue1|issued1|issuedAhead|landed|start) "
echo "trace t=$(( $(date +%s) - start ))"
env_variant chain .carry/bin/fp4moe_main ""
env_variant one .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=8"
env_variant one1 .carry/bin/fp4moe_main "FP4MOE_DECODE_LAYER=8 FP4MOE_LAYER_KPW=1"
ab_rounds 150 175 "chain one one1" "qwen3-30b:w4a16:1 qwen3-235b:w4a16:1 gpt-oss-120b:w4a16:1"
ab_report chain
echo "ab t=$(( $(date +%s) - start ))"
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 230 bash scripts/gpu_suite.sh tests 2>&1 | tail -10
echo "end t=$(( $(date +%s) - start ))"
