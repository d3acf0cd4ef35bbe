#!/usr/bin/env bash
# Prepared in v60 for the next session: the whole table on main (consts and ring merged since
# v58's table) and the probe's unrun alu_probe rows. Carry [".carry/mn61", ".carry/pr60"]:
#   mn61/cli.xz  main's CLI (sm_90a, stripped, xz):
#     cmake -S . -B build-carry -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a
#     ninja -C build-carry fp4moe && strip -o /tmp/cli build-carry/fp4moe && xz -T2 -6 -c /tmp/cli > .carry/mn61/cli.xz
#   pr60/rs_overlap  nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include -o .carry/pr60/rs_overlap bench/probes/rs_overlap.cu
# Two calls, each within 30 s of the last (as v58's table.sh):
#   PROBE=1 RUN_NAME=short WARM_MS=0 EXTRA=--check BASELINE=1 TABLE_BUDGET_S=500 bash next-table.sh
#   RUN_NAME=sustained WARM_MS=2000 EXTRA= TABLE_BUDGET_S=420 bash next-table.sh
set -u
source scripts/device_lib.sh
if [ "${PROBE:-0}" = 1 ]; then
  chmod +x .carry/pr60/rs_overlap
  .carry/pr60/rs_overlap 12000 > "$OUT/probe-12000.txt" 2>&1
  echo "probe rc=$?"
  sed -n '/ALU kind/,$p' "$OUT/probe-12000.txt"
fi
[ -x .carry/bin/fp4moe ] || unxz .carry/mn61/cli.xz .carry/bin/fp4moe
full_table "${RUN_NAME:-sustained}" .carry/bin/fp4moe "$(date +%F)-h200-v61"
echo "t=$(( $(date +%s) - start ))"
