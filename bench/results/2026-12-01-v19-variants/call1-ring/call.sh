#!/usr/bin/env bash
# Call 1 (one H200): the decode kernels' weight ring - tests under each ring, sanitizers, then the T = 1 A/B.
set -u
start=$(date +%s)
Z=.carry/z6; R=$OUT/r; mkdir -p $R/ab
gunzip -c $Z/fp4moe_tests.gz > $Z/t && gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/t $Z/b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt
F='CudaGemm*decode*:*CudaLayerConformance*T1*:*CudaLayerConformance*T8*:*CudaLayer*Decode*:*Pdl*:CudaGemmConfig*'
for r in 8 4 0; do
  ( FP4MOE_DECODE_RING=$r timeout 200 $Z/t --gtest_filter="$F" --gtest_brief=1 > $R/tests-r$r.log 2>&1; echo "rc=$?" >> $R/tests-r$r.log ) &
done
( FP4MOE_DECODE_RING=8 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $Z/t --gtest_filter='CudaGemm*decode*:*CudaLayerConformance*T1*:-*full_*' --gtest_brief=1 > $R/memcheck.log 2>&1; echo "rc=$?" >> $R/memcheck.log ) &
( FP4MOE_DECODE_RING=8 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $Z/t --gtest_filter='*MatchesHost/decode_nvfp4_decode:*MatchesHost/decode_mxfp4_swiglu_bias_decode:*MatchesHost/nvfp4_silu_decode' --gtest_brief=1 > $R/racecheck.log 2>&1; echo "rc=$?" >> $R/racecheck.log ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # model variant rep ring warps
  ok 540 || return
  FP4MOE_DECODE_RING=$4 FP4MOE_DECODE_WARPS=$5 timeout 60 $Z/b bench --model $1 --tokens 1,4 --iters 200 --no-check --no-baseline --no-ceilings > $R/ab/$1-$2-$3.txt 2>&1
}
for rep in 1 2; do
  for v in "r0w50 0 50" "r8w50 8 50" "r8w24 8 24" "r8w16 8 16" "r4w50 4 50" "r4w24 4 24"; do
    set -- $v
    for m in kimi-k2 qwen3-30b gpt-oss-120b qwen3-235b; do run $m $1 $rep $2 $3; done
  done
done
echo "t=$(( $(date +%s) - start )) s"
for f in $R/tests-r*.log $R/memcheck.log $R/racecheck.log; do echo "== $f"; tail -3 $f; done
cd $R/ab && for f in *; do printf "%-28s %s\n" $f "$(grep -E '^ +(1|4) ' $f | awk '{printf "%s ", $2}')"; done
cd $OUT && tar czf r.tgz r && rm -rf r
