#!/usr/bin/env bash
# v49 call 2 (carry .carry/m49: main cefe8b4's sm_90a CLI and test binary, the library code of
# 4f5edb4): the sanitizers over the wgmma kernels since v45's proxy fence at the rsws producers
# (no sanitizer ran on them since): memcheck and racecheck over every forced rsws / rsws4 / split
# case on 3 CTAs (the ring reused across units) and the sm90 GEMM cases, 4 shards per tool, in
# the background, while pytest builds the package on the device from main and runs
# (gpu_suite.sh python); then `bench --check` at T = 1 / 512 / 2048 on two presets.
set -u
source scripts/device_lib.sh
unxz .carry/m49/tests.xz .carry/bin/fp4moe_tests
unxz .carry/m49/cli.xz .carry/bin/fp4moe
(OUT=$OUT/san SANITIZE_SHARDS=4 SANITIZE_TIMEOUT=300 \
  SANITIZE_FILTER='Cases/CudaGemmSm90Forced.*rsws_3ctas:Cases/CudaGemmSm90Forced.*rsws4_3ctas:Cases/CudaGemmSm90Forced.*split_3ctas:CudaGemmCases/*sm90:-*large_*' \
  timeout 310 bash scripts/gpu_suite.sh sanitize > $OUT/san-summary.txt 2>&1) &
OUT=$OUT/py PYTHON_TIMEOUT=330 timeout 340 bash scripts/gpu_suite.sh python 2>&1 | tail -8 | tee $OUT/python-summary.txt
echo "python t=$(( $(date +%s) - start ))"
wait
cat $OUT/san-summary.txt
for mq in qwen3-30b:w4a16 kimi-k2:w4a4; do
  ok 470 || break
  IFS=: read -r m q <<< "$mq"
  timeout 60 .carry/bin/fp4moe bench --model $m --quant $q --tokens 1,512,2048 --check --no-baseline \
    --json $OUT/rows-$m-$q.json > $OUT/rows-$m-$q.txt 2>&1
  grep -E '^ +(1|512|2048) |check' $OUT/rows-$m-$q.txt | tr -s ' ' | sed "s/^/$m $q: /" | tee -a $OUT/rows.txt
done
(cd $OUT && tar czf logs.tgz san py rows-* && rm -rf san py rows-*)
echo "done t=$(( $(date +%s) - start ))"
