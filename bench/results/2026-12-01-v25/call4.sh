#!/usr/bin/env bash
# v25 call 4, main f7b2f36: kimi-k2 W4A16 and W4A4 full JSON runs again, first on a fresh machine
# (call 2 ran them right after the suite and racecheck; its bf16 baseline came out 2-5% slower than v23's).
set -u
start=$(date +%s)
Z=.carry/z27; mkdir -p .carry/bin $OUT/j
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 285 - ($(date +%s) - start) )); [ $left -gt 60 ] || break
  [ $left -gt 140 ] && left=140
  timeout $left .carry/bin/fp4moe bench --model kimi-k2 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v25-kimi-k2-$q.json > $OUT/j/kimi-$q.txt 2>&1; echo "kimi $q rc=$? t=$(( $(date +%s) - start ))"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
