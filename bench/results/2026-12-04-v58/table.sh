#!/usr/bin/env bash
# v58: the whole table on main with branch hoist merged (kpair merged in v57; v55 ran the last
# full table). Carry [".carry/hc58"] (main's CLI, sm_90a, stripped, xz). Usage:
#   RUN_NAME=short WARM_MS=0 EXTRA=--check bash table.sh      # the GPU's first replays, checked
#   RUN_NAME=sustained WARM_MS=2000 EXTRA= bash table.sh      # after 2 s of replays, with baseline
# BASELINE=1 keeps the bf16 cuBLAS baseline (else --no-baseline). JSONs in $OUT/j (tarred: a call
# returns at most 8 files), SM clock log in $OUT/clocks-$RUN_NAME.csv, a table printed last.
set -u
source scripts/device_lib.sh
mkdir -p $OUT/j
[ -x .carry/bin/fp4moe ] || unxz .carry/hc58/cli.xz .carry/bin/fp4moe
run=${RUN_NAME:-sustained}
base=--no-baseline; [ "${BASELINE:-0}" = 1 ] && base=
clocks_start 100
start=$(date +%s)
for spec in kimi-k2:w4a16 kimi-k2:w4a4 deepseek-v3:w4a16 deepseek-v3:w4a4 gpt-oss-120b:all qwen3-235b:all qwen3-30b:all; do
  m=${spec%%:*}; q=${spec##*:}
  left=$(( ${TABLE_BUDGET_S:-540} - ($(date +%s) - start) )); [ $left -gt 30 ] || break
  [ $left -gt 150 ] && left=150
  if [ "$q" = all ]; then sel=(--all); name=$m; else sel=(--quant $q --tokens 1,8,32,128,512,2048,8192,16384); name=$m-$q; fi
  mark start $run $name
  timeout $left .carry/bin/fp4moe bench --model $m "${sel[@]}" --warmup-ms ${WARM_MS:-2000} ${EXTRA:-} $base \
    --json $OUT/j/2026-12-04-h200-v58-$run-$name.json > $OUT/j/$run-$name.txt 2>&1
  echo "$run $name rc=$? t=$(( $(date +%s) - start ))"
done
clocks_stop
mv $OUT/clocks.csv $OUT/clocks-$run.csv 2>/dev/null; mv $OUT/marks.txt $OUT/marks-$run.txt 2>/dev/null
grep -h "ceilings (this" $OUT/j/$run-*.txt | head -3
echo "PASS lines: $(cat $OUT/j/$run-*.txt | grep -c PASS)  FAIL files: $(grep -l FAIL $OUT/j/$run-*.txt | tr '\n' ' ')"
(cd $OUT && tar czf j-$run.tgz j)
python3 scripts/bench_table.py $OUT/j/*-$run-*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
