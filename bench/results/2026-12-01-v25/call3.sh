#!/usr/bin/env bash
# v25 call 3, main f7b2f36: full JSON runs of deepseek-v3 (W4A16, W4A4), then qwen3-235b,
# gpt-oss-120b and qwen3-30b (--all), as far as the time allows.
set -u
start=$(date +%s)
Z=.carry/z27; mkdir -p .carry/bin $OUT/j
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 560 - ($(date +%s) - start) )); [ $left -gt 90 ] || break
  [ $left -gt 150 ] && left=150
  timeout $left .carry/bin/fp4moe bench --model deepseek-v3 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v25-deepseek-v3-$q.json > $OUT/j/ds-$q.txt 2>&1; echo "deepseek $q rc=$? t=$(( $(date +%s) - start ))"
done
for m in qwen3-235b gpt-oss-120b qwen3-30b; do
  left=$(( 575 - ($(date +%s) - start) )); [ $left -gt 50 ] || break
  [ $left -gt 120 ] && left=120
  timeout $left .carry/bin/fp4moe bench --all --model $m --check --json $OUT/j/2026-12-01-h200-v25-$m.json > $OUT/j/$m.txt 2>&1; echo "$m rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
