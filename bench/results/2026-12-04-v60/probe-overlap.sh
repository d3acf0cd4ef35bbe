#!/usr/bin/env bash
# v60 call 5: bench/probes/rs_overlap.cu (built here: nvcc -O3 -std=c++17 -arch=sm_90a -I src
# -I include; carry .carry/pr60): does an RS wgmma overlap the decode of the warps that issue
# it, without rsws4's producer, barriers and DRAM? Two runs (6,000 and 24,000 k-blocks).
set -u
source scripts/device_lib.sh
chmod +x .carry/pr60/rs_overlap
.carry/pr60/rs_overlap 6000 > $OUT/probe-6000.txt 2>&1; echo "rc=$?"
.carry/pr60/rs_overlap 24000 > $OUT/probe-24000.txt 2>&1; echo "rc=$?"
cat $OUT/probe-24000.txt
echo "t=$(( $(date +%s) - start ))"
