#!/usr/bin/env bash
# v43 call 3 (carry .carry/z84/tests.xz: main 467b4cd's sm_90a test binary): memcheck and racecheck
# over the slot-search test and the decode cases, in the background, while pytest builds the
# package on the device and runs (gpu_suite.sh python).
set -u
source scripts/device_lib.sh
unxz .carry/z84/tests.xz .carry/bin/fp4moe_tests
(OUT=$OUT/san SANITIZE_FILTER='CudaGemmLayout.*:CudaGemmCases/*decode*:-*full_*:*large_*' SANITIZE_TIMEOUT=280 \
  timeout 290 bash scripts/gpu_suite.sh sanitize > $OUT/san-summary.txt 2>&1) &
OUT=$OUT/py PYTHON_TIMEOUT=330 timeout 340 bash scripts/gpu_suite.sh python 2>&1 | tail -8 | tee $OUT/python-summary.txt
echo "python t=$(( $(date +%s) - start ))"
wait
cat $OUT/san-summary.txt
(cd $OUT && tar czf logs.tgz san py && rm -rf san py)
echo "done t=$(( $(date +%s) - start ))"
