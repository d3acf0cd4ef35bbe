#!/usr/bin/env bash
# After v85: main's kernels since the kperm merge (5704a43) under the sanitizers, in parts that
# each fit a call (test binary .carry/v85k/tests.xz: built from kperm 94d1a47, whose src/ and
# tests/ are main's at 5704a43). kperm touched every kernel; v85 ran the sanitizers only over
# the staging and W4A4 wgmma tests (38). Each tool over one filter, until CALL_S (560) s.
#   PART=a  memcheck over the fast path's 24 tile tests
#   PART=b  racecheck over the same, then memcheck over the decode kernels and the one-kernel layer
#   PART=c  memcheck and racecheck over the 40 forced rsws / rsws4 cases of device_lib.sh, then
#           racecheck over the decode kernels and the one-kernel layer
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/tests.xz .carry/bin/fp4moe_tests || exit 1
decode='CudaGemmDecodeSplitCounts/*:CudaLayer.OneKernel*:CudaLayer.OneToken*'
left() { echo $(( ${CALL_S:-560} - ($(date +%s) - start) )); }
run() {  # TOOL FILTER [MAX_S]
  local l; l=$(left); [ -n "${3:-}" ] && [ "$3" -lt "$l" ] && l=$3
  [ "$l" -gt 30 ] || { echo "$1 $2: not started (time)"; return; }
  sanitize "$1" "$2" "$l"
  mv "$OUT/$1.txt" "$OUT/$1-$(echo "$2" | tr -c 'A-Za-z0-9\n' '_' | cut -c1-40).txt"
}
case "${PART:-a}" in
  a) run memcheck 'CudaGemmSm80Tiles/*' ;;
  b) run racecheck 'CudaGemmSm80Tiles/*' 220; run memcheck "$decode" ;;
  c) run memcheck "$rsws_sanitize_cases" 200; run racecheck "$rsws_sanitize_cases" 200; run racecheck "$decode" ;;
  *) echo "PART: got '$PART', need a, b or c" >&2; exit 2 ;;
esac
echo "t=$(( $(date +%s) - start ))"
