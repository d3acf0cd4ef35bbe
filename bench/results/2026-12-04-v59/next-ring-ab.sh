#!/usr/bin/env bash
# Prepared in v59 for the next session (branch ring). Carries .carry/cc59/cli.xz (main's CLI: main's
# kernels are consts', merged in v59) and .carry/rc60/cli.xz (ring's, a copy of .carry/rg60's).
# A/B under the cap, point-major, --check in round 1, at points whose width split runs narrow
# widths 2-6 (kimi-k2 / deepseek-v3 T = 2048, qwen3-235b T = 512 / 2048, qwen3-30b T = 512,
# kimi-k2 W4A4 T = 1024) and at kimi-k2 T = 16384 (rsws at wide width 12). ~520 s.
set -u
source scripts/device_lib.sh
unxz .carry/cc59/cli.xz .carry/bin/fp4moe_main
unxz .carry/rc60/cli.xz .carry/bin/fp4moe_ring
ab_rounds_by_point 340 530 "main ring" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048 qwen3-235b:w4a16:2048 qwen3-30b:w4a16:512 kimi-k2:w4a4:1024 kimi-k2:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
