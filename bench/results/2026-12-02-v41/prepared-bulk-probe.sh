#!/usr/bin/env bash
# Prepared for the next session (not run: v41's device time ran out): does a per-warp ring of
# bulk copies (cp.async.bulk, D k-blocks of both row tiles per copy) read the decode kernels'
# slices faster than their 16-byte register loads? bench/probes/read_pattern.cu's bulk mode; each
# variant first checks its fold over random data (a WRONG line if not). Needs nvcc on the device
# (~20 s) or a carried binary as $1 (built here: nvcc -O3 -std=c++17 -arch=sm_90a). ~60 s.
set -u
BIN=${1:-}
if [ -z "$BIN" ]; then
  nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/read_pattern bench/probes/read_pattern.cu && BIN=/tmp/read_pattern
fi
timeout 100 "$BIN" > $OUT/rp-kimi.txt 2>&1; echo "rc=$?"
timeout 120 "$BIN" 8192 112 > $OUT/rp-x4.txt 2>&1; echo "rc=$?"
for f in $OUT/rp-kimi.txt $OUT/rp-x4.txt; do
  head -2 $f; grep -E "WRONG|bulk" $f; grep -E "rmajor +slices +(2|4|14) +2 +(24|48)" $f
done
