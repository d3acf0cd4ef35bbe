#!/usr/bin/env bash
# v59 call 7: A/B main (.carry/cc59: consts' CLI = main's kernels) -> branch inter (.carry/in60:
# rsws4 issues each k-step's wgmma after its own decode, a fence each). Point-major, --check in
# round 1, at the rsws4 points. ~260 s.
set -u
source scripts/device_lib.sh
unxz .carry/cc59/cli.xz .carry/bin/fp4moe_main
unxz .carry/in60/cli.xz .carry/bin/fp4moe_inter
ab_rounds_by_point 150 215 "main inter" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048 qwen3-30b:w4a16:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
