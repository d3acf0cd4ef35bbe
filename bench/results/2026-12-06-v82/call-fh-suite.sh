#!/usr/bin/env bash
# v82: branch fhoist's test binary (carry .carry/v82/fh-tests.xz): the whole binary, EP apart
# (8 shards), then memcheck and racecheck (SAN_TOOLS) over the fast path's tile tests (SAN).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/fh-tests.xz .carry/bin/fp4moe_tests || exit 1
suite_shards
for tool in ${SAN_TOOLS:-memcheck racecheck}; do sanitize $tool "${SAN:-CudaGemmSm80Tiles/*}" ${SAN_S:-140}; done
echo "t=$(( $(date +%s) - start ))"
