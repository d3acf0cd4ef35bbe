#!/usr/bin/env bash
# Prepared for the next session (not run): branch decode-bulk, the decode kernels' weights through
# per-warp rings of bulk copies (FP4MOE_DECODE_BULK=D, D k-blocks a copy, 3 stages; off by
# default). Carry the branch's sm_90a binaries as .carry/<dir>/{cli,tests}.xz (the first argument).
#   1. the read-pattern probe's bulk mode (is the pattern faster through bulk copies at all?);
#   2. the bulk tests (every forced slice count class and D against the host; the T = 1 layer
#      against the reference), then memcheck and racecheck of them;
#   3. A/B at T = 1 W4A16: the register loads against D = 2, 4, 8 (one binary, environment
#      variants).
# ~420 s with start-up.
set -u
source scripts/device_lib.sh
unxz .carry/$1/cli.xz .carry/bin/fp4moe_main
unxz .carry/$1/tests.xz .carry/bin/fp4moe_tests
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/read_pattern bench/probes/read_pattern.cu &&
  timeout 100 /tmp/read_pattern > $OUT/rp-kimi.txt 2>&1
grep -E "seq|WRONG|bulk" $OUT/rp-kimi.txt; grep -E "rmajor +slices +(2|4|14) +2 +(24|48)" $OUT/rp-kimi.txt
echo "probe t=$(( $(date +%s) - start ))"
F='CudaGemmDecodeBulk*:CudaLayer.OneTokenThroughBulkRings'
stdbuf -oL timeout 200 .carry/bin/fp4moe_tests --gtest_filter="$F" > $OUT/bulk-tests.log 2>&1
echo "bulk tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/bulk-tests.log | tr '\n' ' ') t=$(( $(date +%s) - start ))"
for tool in memcheck racecheck; do
  ok 200 || break
  timeout 120 compute-sanitizer --tool $tool .carry/bin/fp4moe_tests --gtest_filter="CudaLayer.OneTokenThroughBulkRings" \
    > $OUT/bulk-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/bulk-$tool.log | tail -1) t=$(( $(date +%s) - start ))"
done
for d in 2 4 8; do env_variant b$d .carry/bin/fp4moe_main "FP4MOE_DECODE_BULK=$d"; done
ab_rounds 330 370 "main b2 b4 b8" "kimi-k2:w4a16:1 qwen3-235b:w4a16:1"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
(cd $OUT && tar czf logs.tgz *.log *.txt 2>/dev/null)
