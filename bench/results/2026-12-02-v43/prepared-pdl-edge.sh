#!/usr/bin/env bash
# Prepared for the next session: branch pdl-edge = fast-pdl + decode-edge, one binary whose
# switches give all four launch rules:
#   main  FP4MOE_SM80_PDL=0 FP4MOE_DECODE_EDGE2=2   (main's launches and split rule)
#   pdl   FP4MOE_DECODE_EDGE2=2                     (fast-pdl alone)
#   edge  FP4MOE_SM80_PDL=0                         (decode-edge alone)
#   both  (the branch's defaults)
#   bash bench/results/2026-12-02-v43/prepared-pdl-edge.sh small   (~480 s with start-up)
#   bash bench/results/2026-12-02-v43/prepared-pdl-edge.sh large   (~400 s with start-up)
# Carry .carry/z89 (the branch's sm_90a CLI and test binary).
#   small: the whole test binary, EP apart, in 8 shards (the conformance cases compare
#          FP4MOE_SM80_PDL=0 bit for bit against the default launch); then the four rules on the
#          E = 128 presets at T = 4-128 (decode-edge moves qwen3-30b T = 7-8 and qwen3-235b T = 4;
#          fast-pdl every point where the fast path runs a GEMM).
#   large: the four rules on kimi-k2 and deepseek-v3 at T = 2 / 3 (decode-edge moves both) and
#          kimi-k2 T = 32 / 512 (fast path).
set -u
source scripts/device_lib.sh
unxz .carry/z89/cli.xz .carry/bin/fp4moe_pe
env_variant main .carry/bin/fp4moe_pe "FP4MOE_SM80_PDL=0 FP4MOE_DECODE_EDGE2=2"
env_variant pdl .carry/bin/fp4moe_pe "FP4MOE_DECODE_EDGE2=2"
env_variant edge .carry/bin/fp4moe_pe "FP4MOE_SM80_PDL=0"
env_variant both .carry/bin/fp4moe_pe ""
if [ "${1:-small}" = small ]; then
  unxz .carry/z89/tests.xz .carry/bin/fp4moe_tests
  OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 |
    grep -E "^== |FAILED" | tee $OUT/suite-summary.txt
  (cd $OUT && tar czf suite.tgz suite && rm -rf suite)
  echo "suite t=$(( $(date +%s) - start ))"
  ab_rounds 400 430 "main pdl edge both" "qwen3-30b:w4a16:7,8,32,128 qwen3-235b:w4a16:4,8,128 gpt-oss-120b:w4a16:16,128"
else
  ab_rounds 320 350 "main pdl edge both" "kimi-k2:w4a16:2,3,32,512 deepseek-v3:w4a16:2,3"
fi
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
