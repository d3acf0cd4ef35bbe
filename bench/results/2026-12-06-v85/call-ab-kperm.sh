#!/usr/bin/env bash
# v85: main against branch kperm (the k-permuted weight layout), under the power cap, rounds
# point by point after 2 s of replays, round 1 with --check for both:
#   main  .carry/v82/fh-cli.xz (branch fhoist's CLI: main's src since the v83 merge)
#   k     .carry/v85k/cli.xz (branch kperm at 94d1a47)
# AB_START / AB_STOP (s since start) bound the rounds; SPECS the points.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/fh-cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/v85k/cli.xz .carry/bin/fp4moe_k || exit 1
ab_session ${AB_START:-300} ${AB_STOP:-420} "main k" "${SPECS:-kimi-k2:w4a16:8 kimi-k2:w4a16:128 kimi-k2:w4a16:512 kimi-k2:w4a16:2048 deepseek-v3:w4a16:128 kimi-k2:w4a4:2048 kimi-k2:w4a16:16384}"
echo "t=$(( $(date +%s) - start ))"
