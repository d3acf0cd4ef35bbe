#!/usr/bin/env bash
# v42 call 2: the decode kernels against the fast path where the split rule just takes them
# (warps wanted per unit a little over 2): main against FP4MOE_GEMM=fast (both GEMMs on the
# mma.sync fast path), alternated processes, W4A16. Carry .carry/z78 (main d2f1719's CLI).
set -u
source scripts/device_lib.sh
unxz .carry/z78/cli.xz .carry/bin/fp4moe_main
env_variant fast .carry/bin/fp4moe_main "FP4MOE_GEMM=fast"
FP4MOE_LOG=1 timeout 40 .carry/bin/fp4moe_main bench --model qwen3-30b --tokens 4,6,8 --iters 5 --no-check --no-baseline --no-ceilings 2>&1 | grep -E "decode|fp4moe:" | head -20 > $OUT/log-choices.txt
ab_rounds 250 290 "main fast" "qwen3-30b:w4a16:4,6,8 qwen3-235b:w4a16:3,4,5 gpt-oss-120b:w4a16:3,4,5"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
cat $OUT/log-choices.txt
