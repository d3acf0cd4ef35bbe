#!/usr/bin/env bash
# Prepared in v58 for the next session (branch consts). Carries .carry/hc58/cli.xz (main's CLI:
# main's kernels are hoist's, merged in v58) and .carry/cc59/cli.xz (consts', a copy of
# .carry/cs59/cli.xz: the carry limit holds two CLIs beside the tree). A/B under the cap,
# point-major, --check in round 1; the points of rsws4's GEMM 1 and GEMM 2 at 40-64 tokens and one
# 128-token point (consts leaves rsws alone). ~520 s.
set -u
source scripts/device_lib.sh
unxz .carry/hc58/cli.xz .carry/bin/fp4moe_main
unxz .carry/cc59/cli.xz .carry/bin/fp4moe_consts
ab_rounds_by_point 340 530 "main consts" \
  "qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048 kimi-k2:w4a16:2048 kimi-k2:w4a4:1024 gpt-oss-120b:w4a16:2048 qwen3-30b:w4a16:512 kimi-k2:w4a16:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
