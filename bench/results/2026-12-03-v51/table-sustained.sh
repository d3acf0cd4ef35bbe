#!/usr/bin/env bash
# v51: the full table under a sustained load, with the copy ceiling timed on a stream (4.25 TB/s;
# in a graph the memcpy runs on the copy engines). Carry [".carry/r51"] (main's CLI with the
# ceiling fix, sm_90a, stripped, xz). Usage: bash table-sustained.sh SPEC... where SPEC is
# preset:quant (kimi-k2:w4a16) or preset:all (--all over that preset); each row timed after
# `--warmup-ms ${WARM_MS:-2000}` of untimed replays, no baseline, no check (v48: PASS at all 72
# points on the same GEMM and layer kernels). JSONs in $OUT/j (tarred into $OUT/j.tgz: a call
# returns at most 8 files), SM clock log in $OUT/clocks.csv. WARM_MS=0 RUN_NAME=short: the
# default timing (the GPU's first replays), as the README's tables before v51.
set -u
source scripts/device_lib.sh
mkdir -p $OUT/j
unxz .carry/r51/cli.xz .carry/bin/fp4moe
clocks_start 100
for spec in "$@"; do
  m=${spec%%:*}; q=${spec##*:}
  ok ${TABLE_BUDGET_S:-480} || break
  if [ "$q" = all ]; then sel=(--all); name=$m; else sel=(--quant $q --tokens 1,8,32,128,512,2048,8192,16384); name=$m-$q; fi
  mark start $name
  timeout 150 .carry/bin/fp4moe bench --model $m "${sel[@]}" --warmup-ms ${WARM_MS:-2000} --no-check --no-baseline \
    --json $OUT/j/$(date +%F)-h200-v51-${RUN_NAME:-sustained}-$name.json > $OUT/j/$name.txt 2>&1
  echo "$name rc=$? t=$(( $(date +%s) - start ))"
done
clocks_stop
grep -h "ceilings (this" $OUT/j/*.txt | head -3
(cd $OUT && tar czf j-${RUN_NAME:-sustained}.tgz j)
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^### /{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
