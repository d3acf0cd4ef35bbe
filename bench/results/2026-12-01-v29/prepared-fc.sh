#!/usr/bin/env bash
# Prepared in v29 for the next session (carry [".carry/z42"], two calls: prepared-fc.sh ~420 s, then prepared-fc-ab.sh ~560 s): the fused combine.
# Binaries built here (sm_90a, static cudart): main = main's kernels (f5212ed's SASS); fc1 =
# branch fused-combine 276923e (2 buffers of 8 KiB, 8 stages); fc2 = branch fused-combine2
# (4 buffers, 3 of them in the last stage: GEMM 2's 128-token kernels run 7 stages; the slot
# rows queued with the tile); fc2_tests = fc2's test binary.
# 1. fc2's new tests (the fused combine against the combine kernel's bits; the combine's
#    skipping of flagged tiles), then under memcheck and racecheck;
# 2. fc2's whole test binary, EP apart, 8 shards;
# 3. a --check run of fc2 fused (this script, 1-3); then prepared-fc-ab.sh: the graph's nodes
#    in place, fc2 off and on; 4. the A/B, one process per point, alternated: main; fc1 on; fc2 off
#    (FP4MOE_FUSED_COMBINE=0: only the 7 stages); fc2 count (FP4MOE_FUSED_COMBINE_ENGINE=0:
#    GEMM 2 counts, combines nothing); fc2 on. qwen3-30b and qwen3-235b, T = 16384.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z42/fc2_tests.xz .carry/bin/fp4moe_tests
for v in main fc1 fc2; do unxz .carry/z42/$v.xz .carry/bin/$v; done
timeout 120 .carry/bin/fp4moe_tests --gtest_filter='*Fused*:CudaCombine.*' > $OUT/new-tests.log 2>&1
echo "new tests rc=$? t=$(( $(date +%s) - start ))"; grep -E "^\[  (PASSED|FAILED) |Failure" $OUT/new-tests.log | head -8
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 .carry/bin/fp4moe_tests \
    --gtest_filter='CudaLayer.FusedCombine*' > $OUT/$tool.log 2>&1
  echo "$tool rc=$? t=$(( $(date +%s) - start ))"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/$tool.log | head -3
done
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
ok 540 && timeout 60 .carry/bin/fc2 bench --model qwen3-30b --tokens 2048,16384 --iters 10 --no-baseline --no-ceilings \
  > $OUT/ab/check-qwen3-30b.txt 2>&1; echo "check rc=$? t=$(( $(date +%s) - start ))"; grep -E "^ *[0-9]+ " $OUT/ab/check-qwen3-30b.txt
cd $OUT && tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
