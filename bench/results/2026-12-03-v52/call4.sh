#!/usr/bin/env bash
# v52 call 4 (carry [".carry/r51c"]: main c2c3006's CLI; timeout_s 420). kimi-k2 T = 2048 (43 rows
# per expert, 49% of its floor) under the cap: the width split's narrow width one wider
# (FP4MOE_SM90_NARROW=7, 56 tokens: ~2% of the experts left for the 64-token launch instead of
# ~a fifth) and no width split (FP4MOE_SM90_WIDTHS=0), against the rule. v36 measured w+1 only
# at T = 768 / 1024 (+2.3 / +3.9%, short timing).
set -u
source scripts/device_lib.sh
unxz .carry/r51c/cli.xz .carry/bin/fp4moe
env_variant main .carry/bin/fp4moe "FP4MOE_LOG=1"
env_variant n7 .carry/bin/fp4moe "FP4MOE_LOG=1 FP4MOE_SM90_NARROW=7"
env_variant nw .carry/bin/fp4moe "FP4MOE_LOG=1 FP4MOE_SM90_WIDTHS=0"
clocks_start 200
ab_rounds ${ROUND_S:-250} ${POINT_S:-330} "main n7 nw" "kimi-k2:w4a16:1024,2048"
clocks_stop
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -h "fp4moe: gemm. sm90" $OUT/ab/*-r1.txt | sort | uniq -c | head -20
ab_report main | tee $OUT/ab-report.txt
