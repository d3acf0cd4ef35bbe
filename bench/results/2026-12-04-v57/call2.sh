#!/usr/bin/env bash
# v57 call 2 (carry .carry/r55: main's CLI, .carry/kp3: branch kpair's final form's CLI).
# A/B under the cap, point-major, --check in round 1. ~520 s.
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe_main
unxz .carry/kp3/cli.xz .carry/bin/fp4moe_kpair
ab_rounds_by_point 340 530 "main kpair" \
  "deepseek-v3:w4a16:2048 kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 kimi-k2:w4a4:1024 deepseek-v3:w4a4:1024 qwen3-235b:w4a16:8192 kimi-k2:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
