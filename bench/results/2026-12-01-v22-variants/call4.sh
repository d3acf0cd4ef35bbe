#!/usr/bin/env bash
# v22 call 4: kimi-k2 full JSON runs (W4A16, then W4A4) on the final binary (tree of 5a7a3f6).
set -u
start=$(date +%s)
Z=.carry/z19; mkdir -p .carry/bin $OUT/j
gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 395 - ($(date +%s) - start) )); [ $left -gt 60 ] || break
  timeout $left .carry/bin/fp4moe bench --model kimi-k2 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v22-kimi-k2-$q.json > $OUT/j/kimi-$q.txt 2>&1; echo "$q rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
