#!/usr/bin/env bash
# v23 call 4: deepseek-v3 full JSON runs on main 8c59620 (W4A16, then W4A4), then kimi-k2 W4A16 T = 1-512 again (repeatability).
set -u
start=$(date +%s)
Z=.carry/z21; mkdir -p .carry/bin $OUT/j
gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 470 - ($(date +%s) - start) )); [ $left -gt 90 ] || break
  [ $left -gt 230 ] && left=230
  timeout $left .carry/bin/fp4moe bench --model deepseek-v3 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v23-deepseek-v3-$q.json > $OUT/j/ds-$q.txt 2>&1; echo "deepseek $q rc=$? t=$(( $(date +%s) - start ))"
done
left=$(( 540 - ($(date +%s) - start) ))
[ $left -gt 50 ] && { timeout $left .carry/bin/fp4moe bench --model kimi-k2 --quant w4a16 --tokens 1,8,32,128,512 --check --json $OUT/j/kimi-repeat.json > $OUT/j/kimi-repeat.txt 2>&1; echo "kimi repeat rc=$? t=$(( $(date +%s) - start ))"; }
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s|%s\n", $2, $3, $6, $10}'
cd $OUT && tar czf all.tgz j
