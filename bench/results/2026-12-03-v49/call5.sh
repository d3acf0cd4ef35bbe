#!/usr/bin/env bash
# v49 call 5 (carry .carry/r49: the register route kernel's sm_90a CLI and test binary;
# .carry/m49/cli.xz: main's CLI): the routing test (ids and weights bit for bit against the
# reference, every kernel width and the shared-memory fallback, T = 1 / 7 / 300, fresh seeds, 3
# runs) and memcheck / racecheck of it; then `route us` of both CLIs at T = 1 / 16384 on two
# presets, alternated.
set -u
source scripts/device_lib.sh
unxz .carry/r49/tests.xz .carry/bin/fp4moe_tests
unxz .carry/r49/cli.xz .carry/bin/fp4moe_reg
unxz .carry/m49/cli.xz .carry/bin/fp4moe_main
mkdir -p $OUT/c5
timeout 60 .carry/bin/fp4moe_tests --gtest_filter='CudaRouting.*' --gtest_repeat=3 > $OUT/c5/route-test.log 2>&1
echo "route test rc=$? $(grep -cE '^\[       OK' $OUT/c5/route-test.log) ok, $(grep -cE '^\[  FAILED' $OUT/c5/route-test.log) failed"
grep -E "FAILED|Failure|gpu id" $OUT/c5/route-test.log | head -12
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 .carry/bin/fp4moe_tests --gtest_filter='CudaRouting.*' > $OUT/c5/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/c5/$tool.log | tail -1)"
done
for m in qwen3-30b kimi-k2; do
  for v in main reg; do
    ok 110 || break
    timeout 70 .carry/bin/fp4moe_$v bench --model $m --tokens 1,16384 --iters 30 --warmup 5 --no-baseline --no-ceilings > $OUT/c5/$m-$v.txt 2>&1
    grep -E '^ +(1|16384) ' $OUT/c5/$m-$v.txt | tr -s ' ' | cut -d' ' -f2-4 | sed "s/^/$m $v: /" | tee -a $OUT/c5/route.txt
  done
done
(cd $OUT && tar czf c5.tgz c5 && rm -rf c5)
echo "done t=$(( $(date +%s) - start ))"
