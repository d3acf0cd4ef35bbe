#!/usr/bin/env bash
# v90: branch kaddr (v86's lead, rewritten on main 60f30ec: the staging kernels address a
# k-permuted block's pairs from one base at constant offsets, kperm_block_at; x's NVFP4 codes by
# one 8-byte load). Carry .carry/v90k/both.{xz,len} (kaddr's,
# BOTH=1) and .carry/v90/cli.xz (main). One call:
#   1. the whole test binary, EP apart (8 shards), beside memcheck over the staging's tests;
#   2. bench --check of kaddr at three W4A4 points;
#   3. main against kaddr, rounds point by point after 2 s of replays, from AB_START to AB_STOP
#      (s since start): W4A4 where the staging runs, W4A16 T = 8192 (x staged k-permuted).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz_both .carry/v90k kaddr || exit 1
unxz .carry/v90/cli.xz .carry/bin/fp4moe_main || exit 1
sanitize_job memcheck staging "$staging_cases" 200 &
suite_shards
echo "suite t=$(( $(date +%s) - start ))"
wait
cat "$OUT"/*.line
check_points kaddr "qwen3-30b:w4a4:8192 kimi-k2:w4a4:2048,16384 deepseek-v3:w4a4:512"
echo "check t=$(( $(date +%s) - start ))"
ab_session ${AB_START:-330} ${AB_STOP:-400} "main kaddr" "${SPECS:-qwen3-30b:w4a4:8192 kimi-k2:w4a4:16384 kimi-k2:w4a4:2048 qwen3-30b:w4a16:8192}"
echo "t=$(( $(date +%s) - start ))"
