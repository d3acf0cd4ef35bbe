#!/usr/bin/env bash
# Prepared in v77 for the next H200 calls (each PART within one call; needs_h200):
#   PART=san (~480 s, carry .carry/lw): what v77 left of the sanitizer runs on the H200:
#     memcheck and racecheck over the fast path's 24 tile tests (CudaGemmSm80Tiles/*, 150 s
#     each: 80 s was too short on the H200), then racecheck over
#     CudaGemmSm90.WidthSplitAtEveryWidth (300 s alone was not enough in v77's call 3: the
#     rest of the call).
#   PART=ew (~400 s, carry .carry/ew): branch early-w's A/B under the power cap
#     (ab-early-w.sh; on an H100 it moved six points by -0.4 to +0.3%), then ncu-small.sh on
#     the H200 with main's order, to set beside v77's H100 profile.
set -u
case "${PART:-san}" in
  san)
    source scripts/device_lib.sh
    unxz .carry/lw/tests.xz .carry/bin/fp4moe_tests || exit 1
    sanitizers 'CudaGemmSm80Tiles/*' 150
    left=$(( ${CALL_S:-560} - ($(date +%s) - start) - 10 ))
    timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 .carry/bin/fp4moe_tests \
      --gtest_filter='CudaGemmSm90.WidthSplitAtEveryWidth' > "$OUT/racecheck-widths.txt" 2>&1
    echo "racecheck widths rc=$? (limit $left s) $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$OUT/racecheck-widths.txt" | tr '\n' ' ')" ;;
  ew)
    AB_START=${AB_START:-240} AB_STOP=${AB_STOP:-300} bash bench/results/2026-12-05-v77/ab-early-w.sh
    cp .carry/bin/fp4moe_ew .carry/bin/fp4moe
    FP4MOE_SM80_EARLY_W=0 CASES="qwen3-30b@32 kimi-k2@8" STOP_S=120 bash bench/results/2026-12-05-v77/ncu-small.sh ;;
esac
