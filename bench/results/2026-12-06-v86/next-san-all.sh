#!/usr/bin/env bash
# After v86: v85's next-san.sh (three calls) in one call. main's kernels since the kperm merge
# (test binary .carry/v85k/tests.xz, kperm 94d1a47 = main's src/ and tests/ at 5704a43) under
# the sanitizers, the six (tool, filter) jobs as parallel processes on the one GPU:
# compute-sanitizer's instrumentation is host-bound, and the machine has 16 cores. Each job
# stops at CALL_S (540) s since start; its log $OUT/TOOL-FILTERNAME.txt, a line each at the end.
#   tiles   the fast path's 24 tile tests (CudaGemmSm80Tiles)
#   decode  the decode kernels and the one-kernel layer
#   rsws    the 40 forced rsws / rsws4 cases of device_lib.sh
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/tests.xz .carry/bin/fp4moe_tests || exit 1
decode='CudaGemmDecodeSplitCounts/*:CudaLayer.OneKernel*:CudaLayer.OneToken*'
job() {  # TOOL NAME FILTER: one compute-sanitizer process until CALL_S, its summary line
  local l=$(( ${CALL_S:-540} - ($(date +%s) - start) ))
  timeout "$l" compute-sanitizer --tool "$1" --error-exitcode 3 .carry/bin/fp4moe_tests --gtest_filter="$3" \
    > "$OUT/$1-$2.txt" 2>&1
  echo "$1 $2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$1-$2.txt" | tr '\n' ' ')" \
    > "$OUT/$1-$2.line"
}
for tool in memcheck racecheck; do
  job $tool tiles 'CudaGemmSm80Tiles/*' &
  job $tool decode "$decode" &
  job $tool rsws "$rsws_sanitize_cases" &
done
wait
cat "$OUT"/*.line
echo "t=$(( $(date +%s) - start ))"
