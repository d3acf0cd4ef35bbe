#!/usr/bin/env bash
# v55 call 6 (carry [".carry/cw2"]: main 181973f's CLI with the experiment `cw2` uncommitted,
# sm_90a, stripped, xz). FP4MOE_SM90_RSWS4_CW=2 runs rsws4's 64-token launches and its narrow
# widths 5 / 6 on 2 consumer warpgroups with 2 m-tiles per warp (rsws's roles): SASS 21.1
# instructions per weight word in the k loop against 27.4. A/B under the cap (2 s of replays
# before each point), the same binary without the variable as the base, point-major, --check in
# round 1. ~300 s.
set -u
source scripts/device_lib.sh
unxz .carry/cw2/cli.xz .carry/bin/fp4moe
env_variant base .carry/bin/fp4moe ""
env_variant cw2 .carry/bin/fp4moe "FP4MOE_SM90_RSWS4_CW=2"
ab_rounds_by_point 190 265 "base cw2" "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 qwen3-30b:w4a16:512 deepseek-v3:w4a16:2048"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report base
