#!/usr/bin/env bash
# Prepared in v59 for the next session: main, branch ring and branch halves (on ring) in one A/B
# (the tracked tree is 22 MiB since v59's JSON and PNG re-encoding, so three CLIs fit the 64 MiB
# a call carries). Carries .carry/cc59 (main's CLI), .carry/rc60 (ring's), .carry/hv60 (halves').
# Under the cap, point-major, --check in round 1 (halves' tests have not run: its check is this),
# at the points of next-ring-ab.sh. ~560 s. In place of next-ring-ab.sh and next-halves-ab.sh.
set -u
source scripts/device_lib.sh
unxz .carry/cc59/cli.xz .carry/bin/fp4moe_main
unxz .carry/rc60/cli.xz .carry/bin/fp4moe_ring
unxz .carry/hv60/cli.xz .carry/bin/fp4moe_halves
ab_rounds_by_point 380 560 "main ring halves" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048 qwen3-235b:w4a16:2048 qwen3-30b:w4a16:512 kimi-k2:w4a4:1024 kimi-k2:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
