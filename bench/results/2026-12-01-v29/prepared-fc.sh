#!/usr/bin/env bash
# Prepared in v29 for the next session (carry [".carry/z42"], ~560 s): branch fused-combine
# (cfc72fd, built here: sm_90a, static cudart). 1. Its new tests first (the fused combine
# against the combine kernel's bits, the combine's skipping of flagged tiles), then under
# memcheck and racecheck; 2. the whole test binary, EP apart, 8 shards; 3. the A/B in one binary:
# FP4MOE_FUSED_COMBINE=0 (off), FP4MOE_FUSED_COMBINE_ENGINE=0 (count: GEMM 2 counts, combines
# nothing) and the default (on: fused from 16384 routed rows), alternated, after one --check run
# of the fused layer and the graph's nodes in place (off, on).
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z42/fc_tests.xz .carry/bin/fp4moe_tests
unxz .carry/z42/fc.xz .carry/bin/fc
F='*Fused*:CudaCombine.*'
timeout 120 .carry/bin/fp4moe_tests --gtest_filter="$F" > $OUT/new-tests.log 2>&1
echo "new tests rc=$? t=$(( $(date +%s) - start ))"; grep -E "^\[  (PASSED|FAILED) |Failure" $OUT/new-tests.log | head -8
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 .carry/bin/fp4moe_tests \
    --gtest_filter='CudaLayer.FusedCombine*' > $OUT/$tool.log 2>&1
  echo "$tool rc=$? t=$(( $(date +%s) - start ))"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/$tool.log | head -3
done
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
ok 420 && timeout 90 .carry/bin/fc bench --model qwen3-30b --tokens 2048,16384 --iters 10 --no-baseline --no-ceilings \
  > $OUT/ab/check-qwen3-30b.txt 2>&1; echo "check rc=$? t=$(( $(date +%s) - start ))"; grep -E "^ *[0-9]+ " $OUT/ab/check-qwen3-30b.txt
# the graph's nodes in place, fused off and on: what is left to the combine kernel
for v in off on; do
  ok 440 || break
  if [ $v = off ]; then export FP4MOE_FUSED_COMBINE=0; else unset FP4MOE_FUSED_COMBINE; fi
  timeout 60 .carry/bin/fc bench --model qwen3-235b --tokens 16384 --iters 20 --no-check --no-baseline --no-ceilings \
    --nodes > $OUT/ab/nodes-$v.txt 2>&1
  echo "nodes $v rc=$? t=$(( $(date +%s) - start ))"
done
unset FP4MOE_FUSED_COMBINE
r=0
while ok 540; do
  r=$((r + 1))
  for v in off count on; do
    for m in qwen3-30b:16384 qwen3-235b:16384; do
      ok 570 || break
      unset FP4MOE_FUSED_COMBINE FP4MOE_FUSED_COMBINE_ENGINE
      [ $v = off ] && export FP4MOE_FUSED_COMBINE=0
      [ $v = count ] && export FP4MOE_FUSED_COMBINE_ENGINE=0
      timeout 40 .carry/bin/fc bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline \
        --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    done
  done
done
unset FP4MOE_FUSED_COMBINE FP4MOE_FUSED_COMBINE_ENGINE
cd $OUT && grep -H "^ *16384" ab/*-r*.txt | awk '{print $1, $3}' | sort && tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
