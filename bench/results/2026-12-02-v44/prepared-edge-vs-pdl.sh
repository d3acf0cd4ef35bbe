#!/usr/bin/env bash
# Prepared for a next session (v44 had too little device time left to start it; ~220 s with
# start-up). Carry .carry/z89/cli.xz (main 928ffa1's CLI), or a newer build of main, named by CLI_XZ.
# The merged rule (both) against fast-pdl alone (FP4MOE_DECODE_EDGE2=2) at the points
# decode-edge moves, where v44 §1 saw pdl alone ahead at qwen3-30b T = 8 and deepseek-v3 T = 3
# (0.6 and 1.7 µs, 5-11 rounds): whether GEMM 2's edge after a decode GEMM 1 should go by the
# shape rather than one constant.
set -u
source scripts/device_lib.sh
unxz ${CLI_XZ:-.carry/z89/cli.xz} .carry/bin/fp4moe_pe
env_variant pdl .carry/bin/fp4moe_pe "FP4MOE_DECODE_EDGE2=2"
env_variant both .carry/bin/fp4moe_pe ""
ab_rounds 130 150 "both pdl" "qwen3-30b:w4a16:7,8 qwen3-30b:w4a4:8 qwen3-235b:w4a16:4 deepseek-v3:w4a16:2,3 kimi-k2:w4a16:2,3"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report both | tee $OUT/ab-report.txt
