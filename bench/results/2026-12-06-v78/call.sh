#!/usr/bin/env bash
# v78's device call (carry .carry/v78): the TLB probe (bench/probes/tlb_warm.cu, built here),
# then the racecheck / memcheck of the width split per narrow case in the time left.
set -u
start=$(date +%s)
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
timeout 120 .carry/v78/tlb_warm ${POOL_GB:-48} ${TRIALS:-41} > "$OUT/tlb_warm.txt" 2>&1
echo "tlb_warm rc=$? $(( $(date +%s) - start )) s"; cat "$OUT/tlb_warm.txt"
CALL_S=$(( ${CALL_S:-540} - ($(date +%s) - start) )) bash bench/results/2026-12-06-v78/racecheck-narrow.sh
