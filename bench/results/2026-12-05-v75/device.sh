#!/usr/bin/env bash
# The next device calls (prepared in v75, which got no machine): branch ldgsts-warp-kb's A/B
# against main, the H200 table on the CLI that wins, and that code's whole GPU suite.
# Carries:
#   - .carry/cli: main's CLI (as .carry/COMMIT says);
#   - .carry/lw: branch ldgsts-warp-kb's fp4moe_tests (tests.xz) and CLI (cli.xz), sm_90a,
#     stripped, xz'd with python lzma; .carry/lw/commit names the commit;
#   - .carry/lww: the branch's cp312 sm_90a wheel (pip wheel as 2026-12-05-v72/device.sh says).
# TABLE=lw (default) times the branch's CLI in the table, TABLE=main main's.
#   PART=abtable (~560 s, carry .carry/cli and .carry/lw, needs_h200): main against the branch,
#     point by point after 2 s of replays (round 1 with --check), until ~220 s; then the
#     sustained table (--warmup-ms 2000) within the rest of the call.
#   PART=short (~470 s, carry .carry/lw or .carry/cli, needs_h200): the short table
#     (--warmup-ms 0, --check at every point, the bf16 cuBLAS baseline).
#   PART=suite (~560 s, carry .carry/lw and .carry/lww; any sm_90 card): the branch's whole test
#     binary, EP apart, in 8 shards; pytest from its wheel; memcheck and racecheck over the fast
#     path's tile tests (80 s each). (Main's suite: bench/results/2026-12-05-v72/device.sh
#     PART=suite, carry .carry/tests and .carry/whl.)
# Each JSON's tag names the card the call got.
set -u
source scripts/device_lib.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=gpu ;; esac
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
tag="$(date +%F)-$card-${SESSION:-v78}"
table_cli() {
  if [ "${TABLE:-lw}" = lw ]; then
    [ -x .carry/bin/fp4moe_lw ] || unxz .carry/lw/cli.xz .carry/bin/fp4moe_lw || return 1
    echo .carry/bin/fp4moe_lw
  else
    echo .carry/cli/fp4moe
  fi
}
case "${PART:-abtable}" in
  abtable)
    unxz .carry/lw/cli.xz .carry/bin/fp4moe_lw || exit 1
    cp .carry/cli/fp4moe .carry/bin/fp4moe_main && chmod +x .carry/bin/fp4moe_main
    specs="kimi-k2:w4a16:8,32,128 deepseek-v3:w4a16:8,32 qwen3-235b:w4a16:32,128 gpt-oss-120b:w4a16:32"
    ab_rounds_by_point ${AB_START:-190} ${AB_STOP:-220} "main lw" "$specs"
    ab_report main
    cli=$(table_cli) || exit 1
    WARM_MS=2000 EXTRA= TABLE_BUDGET_S=$(( ${CALL_S:-580} - ($(date +%s) - start) )) \
      full_table sustained "$cli" "$tag" ;;
  short)
    cli=$(table_cli) || exit 1
    WARM_MS=0 EXTRA=--check BASELINE=1 TABLE_BUDGET_S=${TABLE_BUDGET_S:-540} full_table short "$cli" "$tag" ;;
  suite)
    unxz .carry/lw/tests.xz .carry/bin/fp4moe_tests || exit 1
    suite_shards
    pytest_wheel .carry/lww/*.whl 150
    sanitizers 'CudaGemmSm80Tiles/*' 80 ;;
esac
echo "t=$(( $(date +%s) - start ))"
