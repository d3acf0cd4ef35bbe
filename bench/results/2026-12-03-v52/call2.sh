#!/usr/bin/env bash
# v52 call 2 (carry [".carry/r51c"]: main c2c3006's CLI, the same GEMM and layer kernels as
# main; timeout_s 600). The fast path / wgmma crossover (sm90_min_rows) was tuned on a rested
# GPU's first replays; under the 700 W cap the kernel that does less SM work per weight byte
# gains. Variants at the points on either side of it, W4A16, after 2 s of replays:
#   main  the rule
#   wg    FP4MOE_SM90_MIN_ROWS=4 FP4MOE_SM90_MIN_ROWS_MX=4   (wgmma wherever it accepts)
#   fp    FP4MOE_SM90_MIN_ROWS=100000 FP4MOE_SM90_MIN_ROWS_MX=100000   (the fast path)
# rows per active expert: kimi-k2 T = 512 / 1024 10.7 / 21; deepseek-v3 T = 512 16;
# qwen3-235b and qwen3-30b T = 128 / 512 8 / 32; gpt-oss-120b T = 512 / 1024 16 / 32 (MXFP4).
set -u
source scripts/device_lib.sh
unxz .carry/r51c/cli.xz .carry/bin/fp4moe
env_variant main .carry/bin/fp4moe "FP4MOE_LOG=1"
env_variant wg .carry/bin/fp4moe "FP4MOE_LOG=1 FP4MOE_SM90_MIN_ROWS=4 FP4MOE_SM90_MIN_ROWS_MX=4"
env_variant fp .carry/bin/fp4moe "FP4MOE_LOG=1 FP4MOE_SM90_MIN_ROWS=100000 FP4MOE_SM90_MIN_ROWS_MX=100000"
clocks_start 200
ab_rounds ${ROUND_S:-400} ${POINT_S:-500} "main wg fp" \
  "kimi-k2:w4a16:512,1024 deepseek-v3:w4a16:512 qwen3-235b:w4a16:128,512 qwen3-30b:w4a16:128,512 gpt-oss-120b:w4a16:512,1024"
clocks_stop
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -h "fp4moe: gemm" $OUT/ab/*-r1.txt | sed 's/(.*//' | sort | uniq -c | head -40
ab_report main | tee $OUT/ab-report.txt
