#!/usr/bin/env bash
# Run in v58 (branch hoist). Carry .carry/m57/cli.xz (main's CLI) and
# .carry/hc58/cli.xz (hoist's CLI, a copy of .carry/ht57/cli.xz: the carry limit holds two
# CLIs beside the tree). A/B under the cap, point-major, --check in round 1. ~520 s.
set -u
source scripts/device_lib.sh
unxz .carry/m57/cli.xz .carry/bin/fp4moe_main
unxz .carry/hc58/cli.xz .carry/bin/fp4moe_hoist
ab_rounds_by_point 340 530 "main hoist" \
  "qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048 kimi-k2:w4a16:2048 kimi-k2:w4a4:1024 gpt-oss-120b:w4a16:2048 qwen3-30b:w4a16:512 kimi-k2:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
