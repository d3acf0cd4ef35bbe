#!/usr/bin/env bash
# v36 call 4 (carry [".carry/z58"]: this session's CLI and test binary, sm_90a; ~330 s).
# 1. The NVFP4 rows rule by waves (kSm90MinRowsFewWaves / kSm90MinRowsFewestWaves): the config
#    tests and the W4A4 case where only GEMM 1 would take wgmma, on the GPU; then the default
#    against the old threshold (FP4MOE_SM90_MIN_ROWS=16) at qwen3-30b / qwen3-235b T = 256-288.
# 2. The width split one width wider (FP4MOE_SM90_NARROW=w+1), where the tail-bound run (call 3)
#    cost more than the experts it skips: fewer experts past 8w rows, so the 64-token launch
#    that runs them alone mostly has none, against wider narrow tiles for every expert.
# Processes alternate: per round def, old16, wider; round 1 with --check.
set -u
source scripts/device_lib.sh
unxz .carry/z58/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z58/cli.xz .carry/bin/fp4moe_def
timeout 60 .carry/bin/fp4moe_tests \
  --gtest_filter='CudaGemmConfig.*:CudaGemmSm90.W4A4*' > $OUT/tests.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | tr '\n' ' ') t=$(( $(date +%s) - start ))"
env_variant old16 .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=16"
ln -sf fp4moe_def .carry/bin/fp4moe_wider
# point VARIANT ROUND TAG MODEL QUANT TOKENS [NARROW]
point() {
  local chk=--no-check
  [ "$2" = 1 ] && chk=--check
  FP4MOE_SM90_NARROW=${7:-0} timeout 40 ".carry/bin/fp4moe_$1" bench --model "$4" --quant "$5" --tokens "$6" \
    --iters 40 $chk --no-baseline --no-ceilings > "$OUT/ab/$4_$5-$1-r$2$3.txt" 2>&1
}
r=0
while ok 260; do
  r=$((r + 1))
  point def $r "" qwen3-30b w4a16 256,272,288,384,512
  point old16 $r "" qwen3-30b w4a16 256,272,288
  point wider $r a qwen3-30b w4a16 384 5
  point wider $r b qwen3-30b w4a16 512 6
  point def $r "" qwen3-30b w4a4 256
  point old16 $r "" qwen3-30b w4a4 256
  point def $r "" qwen3-235b w4a16 256,272,288,512
  point old16 $r "" qwen3-235b w4a16 256,272,288
  point wider $r "" qwen3-235b w4a16 512 6
  point def $r "" deepseek-v3 w4a16 512
  point wider $r "" deepseek-v3 w4a16 512 4
  point def $r "" gpt-oss-120b w4a16 768,1024
  point wider $r a gpt-oss-120b w4a16 768 5
  point wider $r b gpt-oss-120b w4a16 1024 6
  point def $r "" kimi-k2 w4a16 768,1024
  point wider $r a kimi-k2 w4a16 768 4
  point wider $r b kimi-k2 w4a16 1024 5
done
echo "rounds $r t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1*.txt | tr '\n' ' '; echo
mkdir -p $OUT/cfg
for m in qwen3-30b qwen3-235b; do
  FP4MOE_LOG=1 timeout 30 .carry/bin/fp4moe_def bench --model $m --tokens 256,288 --iters 5 --no-check --no-baseline \
    --no-ceilings 2>&1 | grep -E 'gemm[12]' | sort | uniq -c > $OUT/cfg/$m.txt
done
head -4 $OUT/cfg/*.txt | cut -c1-260
ab_report def
