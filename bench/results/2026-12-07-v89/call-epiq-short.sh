#!/usr/bin/env bash
# v89, with little device time left: call-epiq.sh's checks cut to what v89's first run found
# wrong: the whole test binary, EP apart (8 shards, SHARD_S (200) s at most each), beside
# racecheck over the one-kernel layer's tests. Carry .carry/v89e/tests.xz.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v89e/tests.xz .carry/bin/fp4moe_tests || exit 1
sanitize_job racecheck onekernel 'CudaLayer.OneKernel*' ${CALL_S:-240} &
test_shards '-*Ep*' ${SHARD_S:-200}
wait
cat "$OUT"/*.line
echo "t=$(( $(date +%s) - start ))"
