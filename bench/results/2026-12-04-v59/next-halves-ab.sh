#!/usr/bin/env bash
# Prepared in v59 for the next session (branch halves, on branch ring; notes v59 §5). Carries
# .carry/rc60/cli.xz (ring's CLI) and .carry/hv60/cli.xz (halves'). Timing first: its tests have
# not run; round 1's --check is the only check here. A/B under the cap, point-major, the points of
# next-ring-ab.sh. ~400 s.
set -u
source scripts/device_lib.sh
unxz .carry/rc60/cli.xz .carry/bin/fp4moe_ring
unxz .carry/hv60/cli.xz .carry/bin/fp4moe_halves
ab_rounds_by_point 260 390 "ring halves" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048 qwen3-235b:w4a16:2048 qwen3-30b:w4a16:512 kimi-k2:w4a4:1024"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report ring
