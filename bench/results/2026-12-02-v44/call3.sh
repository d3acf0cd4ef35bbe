#!/usr/bin/env bash
# v44 call 3 (carry .carry/z89: pdl-edge ccdcca7's sm_90a CLI and test binary; its src and tests
# are main 928ffa1's): memcheck and racecheck over the fast path's GEMM cases, its tile cases and
# the layer conformance table (the programmatic-dependent launches), in the background, while
# pytest builds the package on the device from main and runs (gpu_suite.sh python); then the
# T = 8 / 32 / 128 rows of the smaller presets with --check.
set -u
source scripts/device_lib.sh
unxz .carry/z89/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z89/cli.xz .carry/bin/fp4moe
(OUT=$OUT/san SANITIZE_SHARDS=2 SANITIZE_TIMEOUT=270 \
  SANITIZE_FILTER='CudaGemmCases/*fast*:CudaGemmCases/*decode*:CudaGemmSm80Tiles/*:Table/CudaLayerConformance.*:-*full_*' \
  timeout 280 bash scripts/gpu_suite.sh sanitize > $OUT/san-summary.txt 2>&1) &
OUT=$OUT/py PYTHON_TIMEOUT=320 timeout 330 bash scripts/gpu_suite.sh python 2>&1 | tail -8 | tee $OUT/python-summary.txt
echo "python t=$(( $(date +%s) - start ))"
wait
cat $OUT/san-summary.txt
for mq in qwen3-30b:w4a16 qwen3-30b:w4a4 qwen3-235b:w4a16 qwen3-235b:w4a4 gpt-oss-120b:w4a16; do
  ok 500 || break
  IFS=: read -r m q <<< "$mq"
  timeout 60 .carry/bin/fp4moe bench --model $m --quant $q --tokens 8,32,128 --check --no-baseline \
    --json $OUT/rows-$m-$q.json > $OUT/rows-$m-$q.txt 2>&1
  grep -E '^ +(8|32|128) ' $OUT/rows-$m-$q.txt | tr -s ' ' | sed "s/^/$m $q: /" | tee -a $OUT/rows.txt
done
(cd $OUT && tar czf logs.tgz san py rows-* && rm -rf san py rows-*)
echo "done t=$(( $(date +%s) - start ))"
