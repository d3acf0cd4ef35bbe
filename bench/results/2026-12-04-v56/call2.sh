#!/usr/bin/env bash
# v56 call 2 (carry .carry/r55: main's CLI, .carry/k56b: branch kpair's CLI at its second commit:
# two-k-block stages in rsws4 only, rsws's 128-token tiles on one-k-block stages as on main).
# A/B under the cap, point-major, --check in round 1. ~500 s.
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe_main
unxz .carry/k56b/cli.xz .carry/bin/fp4moe_kpair
ab_rounds_by_point 330 520 "main kpair" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 qwen3-30b:w4a16:512 deepseek-v3:w4a16:2048 gpt-oss-120b:w4a16:2048 kimi-k2:w4a16:8192 kimi-k2:w4a4:1024"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
