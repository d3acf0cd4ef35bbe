#!/usr/bin/env bash
# v23 call 3: full JSON runs on main 8c59620: kimi-k2 (W4A16, then W4A4), then qwen3-30b, gpt-oss-120b, qwen3-235b (--all).
set -u
start=$(date +%s)
Z=.carry/z21; mkdir -p .carry/bin $OUT/j
gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 560 - ($(date +%s) - start) )); [ $left -gt 60 ] || break
  [ $left -gt 200 ] && left=200
  timeout $left .carry/bin/fp4moe bench --model kimi-k2 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v23-kimi-k2-$q.json > $OUT/j/kimi-$q.txt 2>&1; echo "kimi $q rc=$? t=$(( $(date +%s) - start ))"
done
for m in qwen3-30b gpt-oss-120b qwen3-235b; do
  left=$(( 570 - ($(date +%s) - start) )); [ $left -gt 50 ] || break
  [ $left -gt 150 ] && left=150
  timeout $left .carry/bin/fp4moe bench --all --model $m --check --json $OUT/j/2026-12-01-h200-v23-$m.json > $OUT/j/$m.txt 2>&1; echo "$m rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
