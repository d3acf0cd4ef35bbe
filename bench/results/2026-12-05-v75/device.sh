#!/usr/bin/env bash
# v75's device calls. Carries: .carry/cli (main's CLI, as .carry/COMMIT says), .carry/lw (branch
# ldgsts-warp-kb's tests.xz and cli.xz, .carry/lw/commit).
#   PART=abtable (~560 s, carry .carry/lw and .carry/cli): the A/B of main against ldgsts-warp-kb,
#     point by point after 2 s of replays (round 1 with --check), until ~220 s; then main's
#     sustained table (--warmup-ms 2000) within the rest.
#   PART=lwtests: bench/results/2026-12-05-v74/next-ldgsts.sh PART=tests (the branch's suite,
#     bench --check at its points, the sanitizers over the fast path's tiles).
#   PART=short / sustained / suite: bench/results/2026-12-05-v72/device.sh with SESSION=v75.
set -u
case "${PART:-abtable}" in
  abtable)
    source scripts/device_lib.sh
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    case "$gpu" in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=gpu ;; esac
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
    unxz .carry/lw/cli.xz .carry/bin/fp4moe_lw || exit 1
    cp .carry/cli/fp4moe .carry/bin/fp4moe_main && chmod +x .carry/bin/fp4moe_main
    specs="kimi-k2:w4a16:8,32,128 deepseek-v3:w4a16:8,32 qwen3-235b:w4a16:32,128 gpt-oss-120b:w4a16:32"
    ab_rounds_by_point ${AB_START:-190} ${AB_STOP:-220} "main lw" "$specs"
    ab_report main
    WARM_MS=2000 EXTRA= TABLE_BUDGET_S=$(( ${CALL_S:-580} - ($(date +%s) - start) )) \
      full_table sustained .carry/cli/fp4moe "$(date +%F)-$card-v75"
    echo "t=$(( $(date +%s) - start ))" ;;
  lwtests) PART=tests bash bench/results/2026-12-05-v74/next-ldgsts.sh ;;
  *) SESSION=v75 bash bench/results/2026-12-05-v72/device.sh ;;
esac
