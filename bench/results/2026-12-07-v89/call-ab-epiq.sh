#!/usr/bin/env bash
# v89: main against branch epiq-r under the power cap, rounds point by point after 2 s of
# replays, round 1 with --check for both:
#   main  .carry/v85k/cli.xz (main's kernels: 5704a43, kperm merged; since then only names)
#   epiq  .carry/v89e/cli.xz (epiq-r with v89's two fixes)
# W4A4 where the requantization moved (T >= 8192), W4A16 as the control. AB_START / AB_STOP
# (s since start) bound the rounds; SPECS the points.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/v89e/cli.xz .carry/bin/fp4moe_epiq || exit 1
ab_session ${AB_START:-170} ${AB_STOP:-230} "main epiq" "${SPECS:-qwen3-30b:w4a4:8192 kimi-k2:w4a4:16384 qwen3-235b:w4a4:8192 qwen3-30b:w4a16:8192}"
echo "t=$(( $(date +%s) - start ))"
