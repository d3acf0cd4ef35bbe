#!/usr/bin/env bash
# v43 call 5 (carry .carry/z86/cli.xz: branch decode-edge, main + FP4MOE_DECODE_EDGE): the decode
# kernels' split rule takes shapes where warps_wanted_per_unit >= EDGE (default 2). A/B of
# EDGE = 2 (main's rule), 1 and 0 (every shape of at most 8 rows per active expert) at points
# where 1 or 0 moves a GEMM from the fast path to the decode kernels (a replica of the rule).
set -u
source scripts/device_lib.sh
unxz .carry/z86/cli.xz .carry/bin/fp4moe_edge
env_variant e2 .carry/bin/fp4moe_edge "FP4MOE_DECODE_EDGE=2"
env_variant e1 .carry/bin/fp4moe_edge "FP4MOE_DECODE_EDGE=1"
env_variant e0 .carry/bin/fp4moe_edge "FP4MOE_DECODE_EDGE=0"
FP4MOE_LOG=1 FP4MOE_DECODE_EDGE=0 timeout 30 .carry/bin/fp4moe_edge bench --model qwen3-30b --quant w4a16 --tokens 16 --iters 2 --no-check --no-baseline --no-ceilings 2>&1 | grep -i decode | head -4
ab_rounds 330 370 "e2 e1 e0" "qwen3-30b:w4a16:8,16,32,64,128 qwen3-235b:w4a16:6,8,16,64 gpt-oss-120b:w4a16:8,16,32,128" "kimi-k2:w4a16:6,32"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report e2 | tee $OUT/ab-report.txt
