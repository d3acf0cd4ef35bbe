#!/usr/bin/env bash
# v84 (v83 call-fh-san.sh, run again): main's fast path since the merge of fhoist (its test binary, carry .carry/v82/fh-tests.xz):
# memcheck over the two tile tests v82's memcheck did not reach, then racecheck over the fast
# path's tile tests until RACE_S seconds.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/fh-tests.xz .carry/bin/fp4moe_tests || exit 1
sanitize memcheck 'CudaGemmSm80Tiles/*mxfp4_swiglu_bias_tile24:CudaGemmSm80Tiles/*mxfp4_swiglu_bias_tile32' ${MEM_S:-120}
sanitize racecheck "${RACE:-CudaGemmSm80Tiles/*}" ${RACE_S:-150}
echo "racecheck: $(grep -c 'OK \]' "$OUT/racecheck.txt") tests passed before its end"
echo "t=$(( $(date +%s) - start ))"
