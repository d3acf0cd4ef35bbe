#!/usr/bin/env bash
# v58 call 5, the session's last ~240 s of device time: a short A/B of branch consts (rsws4's
# decode constants in registers) against main. Carries .carry/hc58/cli.xz (main's CLI: hoist's,
# the merged source) and .carry/cc59/cli.xz (consts'). --check in round 1. Point-major, ~90 s.
set -u
source scripts/device_lib.sh
unxz .carry/hc58/cli.xz .carry/bin/fp4moe_main
unxz .carry/cc59/cli.xz .carry/bin/fp4moe_consts
ab_rounds_by_point 60 90 "main consts" "qwen3-235b:w4a16:512 kimi-k2:w4a16:2048 qwen3-30b:w4a16:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
for f in "$OUT"/ab/*.txt; do echo "$(basename "$f") $(grep -E '^ +[0-9]+ ' "$f" | awk '{print $2}' | tr '\n' ' ') $(grep -c PASS "$f")"; done
ab_report main
