#!/usr/bin/env bash
# v57 call 5 (carry .carry/r55: main's CLI, .carry/kp3: branch kpair's final form's CLI).
# A/B under the cap, point-major, --check in round 1. The 128-token points only (kimi-k2 T = 16384 +0.6% / +0.9% in calls 2-3, but the same kernel sum in call 4's ncu). ~400 s.
set -u
source scripts/device_lib.sh
unxz .carry/r55/cli.xz .carry/bin/fp4moe_main
unxz .carry/kp3/cli.xz .carry/bin/fp4moe_kpair
ab_rounds_by_point 300 420 "main kpair" \
  "kimi-k2:w4a16:16384 kimi-k2:w4a4:16384 deepseek-v3:w4a16:8192"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
