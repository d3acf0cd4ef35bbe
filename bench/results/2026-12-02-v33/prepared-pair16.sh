#!/usr/bin/env bash
# v33 (carry [".carry/z50", ".carry/z49"]: branch pair16 9b6272d's test binary and CLI, main
# 78733f5's CLI; sm_90a). Branch pair16: the fast path's 16-token tiles wait at a CTA barrier
# once per 4 k-blocks instead of 2 (8 stages, as the 8-token tiles since v24: -1.4 to -3.9% there);
# bf16 A's 52 KiB of stages in dynamic shared memory. ptxas: 106 / 109 registers where main has
# 114 / 111 (bf16 / NVFP4 A), no spills; 4 CTAs per SM still fit.
#   bash prepared-pair16.sh tests   (~250 s): the tile and GEMM tests, memcheck and racecheck of
#                                    the forced-tile tests, then the whole test binary (EP apart)
#   bash prepared-pair16.sh ab      (~420 s): main against pair16 where the 16-token tile runs
# Predicted: -1 to -3% where the 16-token tile runs (6-14 rows per expert): qwen3 T = 104-208,
# gpt-oss-120b T = 208-416, kimi-k2 T = 512, deepseek-v3 T = 256.
set -u
source scripts/device_lib.sh
unxz .carry/z50/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z50/cli.xz .carry/bin/fp4moe_p16
unxz .carry/z49/cli.xz .carry/bin/fp4moe_main
if [ "${1:-tests}" = tests ]; then
  timeout 90 .carry/bin/fp4moe_tests --gtest_filter='*Sm80Tile*:*CudaGemm.*' > $OUT/tiles.log 2>&1
  echo "tiles+gemm rc=$? $(tail -1 $OUT/tiles.log)"
  for tool in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool .carry/bin/fp4moe_tests --gtest_filter='*Sm80Tile*' > $OUT/$tool.log 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log)"
  done
  OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
  echo "t=$(( $(date +%s) - start ))"
  exit 0
fi
ab_rounds 330 390 "main p16" \
  "qwen3-30b:w4a16:104,128,192,208 qwen3-30b:w4a4:128,192 qwen3-235b:w4a16:104,128,192 gpt-oss-120b:w4a16:208,256,384" \
  "kimi-k2:w4a16:512 deepseek-v3:w4a16:256"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
python3 scripts/ab_summary.py $OUT/ab --base main
cd $OUT && tar czf ab.tgz ab && rm -rf ab
