#!/usr/bin/env bash
# After v86: v85's next-san.sh (three calls) in one call. main's kernels since the kperm merge
# (test binary .carry/v85k/tests.xz, kperm 94d1a47 = main's src/ and tests/ at 5704a43) under
# the sanitizers: device_lib.sh's sanitize_parallel, six (tool, filter) jobs as parallel
# processes on the one GPU, each until CALL_S (540) s since start; logs $OUT/TOOL-NAME.txt:
#   tiles   the fast path's 24 tile tests (CudaGemmSm80Tiles)
#   decode  the decode kernels and the one-kernel layer
#   rsws    the 40 forced rsws / rsws4 cases of device_lib.sh
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/tests.xz .carry/bin/fp4moe_tests || exit 1
sanitize_parallel ${CALL_S:-540}
echo "t=$(( $(date +%s) - start ))"
