#!/usr/bin/env bash
# v34 call 1 (carry [".carry/z51", ".carry/z46"]: main 6278165's CLI and test binary, and main 1028681's
# CLI, sm_90a; ~330 s). Main now has the permute's block kernel with the bounds v33's A/B gave
# (fused to 32 slots, block to 4096) and the fast path's spill limit per tile step. On the GPU:
# the permute and config tests, memcheck of the permute, the whole test binary (EP apart,
# 8 shards), then the layer at the points that changed, alternated with 1028681 (--check first).
set -u
source scripts/device_lib.sh
unxz .carry/z51/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z51/cli.xz .carry/bin/fp4moe
unxz .carry/z46/cli.xz .carry/bin/fp4moe_old
cp .carry/bin/fp4moe .carry/bin/fp4moe_new
timeout 60 .carry/bin/fp4moe_tests --gtest_filter='CudaPermute.*:CudaGemmConfig.*' > $OUT/permute.log 2>&1
echo "permute+config rc=$? $(tail -1 $OUT/permute.log)"
timeout 60 compute-sanitizer --tool memcheck .carry/bin/fp4moe_tests --gtest_filter='CudaPermute.*' > $OUT/memcheck.log 2>&1
echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/memcheck.log)"
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
ab_rounds 240 290 "new old" "qwen3-30b:w4a16:8,32,88,128,192,1024 qwen3-235b:w4a16:32,88,192 gpt-oss-120b:w4a16:176,384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
python3 scripts/ab_summary.py $OUT/ab --base old
cd $OUT && tar czf ab.tgz ab && rm -rf ab
