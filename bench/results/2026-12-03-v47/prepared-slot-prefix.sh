#!/usr/bin/env bash
# Prepared in v47 (carry [".carry/main-4f5edb4", ".carry/slotpre"]; ~400 s): branch
# `slot-prefix` (736e056 on main 4f5edb4): rsws4's producers find each unit in a slot table in
# shared memory, built once per CTA (E <= 512), where main scans count[] per unit. v47 found
# rsws4's producer path sensitive to the search (8 experts per lane: up to +10%). Its SASS:
# rsws4 +688 instructions (both searches and the table's fill). Not run on a GPU yet.
# First its tests: the slot-search test (the table against the walk, E 1-512, every span) and the
# wgmma GEMM and layer tests; then an A/B against main where rsws4 runs.
# Without .carry/slotpre: a worktree of the branch (or main + slot-prefix.diff), configured as the
# README's device build (-DFP4MOE_CUDA_ARCHS=90a, Release), ninja fp4moe_cli fp4moe_tests, then
# strip and xz -T2 -6 both into .carry/slotpre/{cli,tests}.xz; main's CLI likewise into
# .carry/main-4f5edb4/cli.xz.
set -u
source scripts/device_lib.sh
unxz .carry/main-4f5edb4/cli.xz .carry/bin/fp4moe_main
unxz .carry/slotpre/cli.xz .carry/bin/fp4moe_slotpre
unxz .carry/slotpre/tests.xz .carry/bin/fp4moe_tests
.carry/bin/fp4moe_tests --gtest_filter='*FindSlot*' 2>&1 | tail -3 | tee $OUT/findslot.txt
sm90_shards 150
ab_rounds ${ROUND_S:-380} ${POINT_S:-420} "main slotpre" \
  "qwen3-30b:w4a16:512,2048 qwen3-235b:w4a16:512 gpt-oss-120b:w4a16:2048 kimi-k2:w4a16:512 deepseek-v3:w4a4:2048"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
