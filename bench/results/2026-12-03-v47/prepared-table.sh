#!/usr/bin/env bash
# Prepared in v47 (carry [".carry/main-4f5edb4"]: main 4f5edb4's CLI, sm_90a, stripped). The
# README's tables are v35's (d50d413's code); main since: the decode split and decode edge
# (v38-v44, T = 1-8), the fast path's kernels as dependents (v44), the producers' fence at
# 128-token tiles (v45), and the wgmma kernels' slot search back at one expert per lane (v47).
# The whole table in one call, first in the session on a rested GPU (v35's halves took 117 +
# 298 s): `bash prepared-table.sh` (~430 s). JSONs: $OUT/j/<date>-h200-v48-<preset>[-<quant>].json
# (copy them to bench/results/, then scripts/roofline.py and scripts/bench_table.py for the
# README). `--check` on every run.
set -u
source scripts/device_lib.sh
mkdir -p $OUT/j
unxz .carry/main-4f5edb4/cli.xz .carry/bin/fp4moe
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
# one run: preset $1, JSON name $2, at most $3 s, the rest of the bench flags after
one() {
  local m=$1 name=$2 cap=$3 left
  shift 3
  left=$(( ${TABLE_BUDGET_S:-560} - ($(date +%s) - start) )); [ $left -gt 60 ] || return 0
  [ $left -gt $cap ] && left=$cap
  timeout $left .carry/bin/fp4moe bench --model $m --check --json $OUT/j/$(date +%F)-h200-v48-$name.json "$@" \
    > $OUT/j/$name.txt 2>&1
  echo "$name rc=$? t=$(( $(date +%s) - start ))"
}
for m in qwen3-30b qwen3-235b gpt-oss-120b; do one $m $m 120 --all; done
for m in kimi-k2 deepseek-v3; do
  for q in w4a16 w4a4; do one $m $m-$q 110 --quant $q --tokens 1,8,32,128,512,2048,8192,16384; done
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
