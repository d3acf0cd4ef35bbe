#!/usr/bin/env bash
# v56 call 4 (carry .carry/r55: main's CLI, .carry/k56b: branch kpair's CLI at its second commit:
# two-k-block stages in rsws4 only, rsws's 128-token tiles on one-k-block stages as on main).
# A repeat on other points: the narrow widths at T = 512-2048. ~400 s.
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe_main
unxz .carry/k56b/cli.xz .carry/bin/fp4moe_kpair
ab_rounds_by_point 250 400 "main kpair" \
  "deepseek-v3:w4a16:2048 kimi-k2:w4a16:512 qwen3-235b:w4a16:1024 deepseek-v3:w4a4:1024 qwen3-235b:w4a4:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
