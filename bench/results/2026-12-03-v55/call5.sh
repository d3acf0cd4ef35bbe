#!/usr/bin/env bash
# v55 call 5 (no carry): the Python package built on the device from main 181973f's tree
# (sm_90a) and its tests (gpu_suite.sh python), the first run since v49 (v53's and v54's kernel
# changes among what it exercises through the layer).
set -u
source scripts/device_lib.sh
OUT=$OUT/py PYTHON_TIMEOUT=400 timeout 410 bash scripts/gpu_suite.sh python 2>&1 | tail -8 | tee $OUT/python-summary.txt
echo "python t=$(( $(date +%s) - start ))"
(cd $OUT && tar czf py.tgz py && rm -rf py)
