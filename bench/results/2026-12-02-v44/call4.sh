#!/usr/bin/env bash
# v44 call 4 (carry .carry/z89/tests.xz, main 928ffa1's tests and kernels): call 3's sanitizer
# filter ran past its 270 s guard; a narrower one in 4 shards per tool: the fast path's and the
# split's GEMM cases, the tile cases and five small layer conformance cases (the fast path's
# kernels and the combine as programmatic dependents).
set -u
source scripts/device_lib.sh
unxz .carry/z89/tests.xz .carry/bin/fp4moe_tests
L='Table/CudaLayerConformance.MatchesReference'
OUT=$OUT/san SANITIZE_SHARDS=4 SANITIZE_TIMEOUT=230 \
  SANITIZE_FILTER="CudaGemmCases/*fast*:CudaGemmCases/*splitk*:CudaGemmSm80Tiles/*:$L/qwen3_30b_T64:$L/odd_T67_w4a4:$L/experts_with_zero_tokens:$L/accumulate:$L/invalid_ids_w4a4:-*full_*:*large_*" \
  timeout 240 bash scripts/gpu_suite.sh sanitize 2>&1 | grep -E "shard|FAILED" | tee $OUT/san-summary.txt
(cd $OUT && tar czf logs.tgz san && rm -rf san)
echo "done t=$(( $(date +%s) - start ))"
