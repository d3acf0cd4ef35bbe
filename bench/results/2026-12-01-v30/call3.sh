#!/usr/bin/env bash
# v30 call 3, main's kernels (the `main` CLI of .carry/z42: 531729e's SASS, built at f5212ed):
# the full JSON runs for the README tables: kimi-k2 W4A16 and W4A4, then qwen3-235b, qwen3-30b
# and gpt-oss-120b (--all), each with --check, as far as the time allows.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/j
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z42/main.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 290 - ($(date +%s) - start) )); [ $left -gt 60 ] || break
  [ $left -gt 145 ] && left=145
  timeout $left .carry/bin/fp4moe bench --model kimi-k2 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v30-kimi-k2-$q.json > $OUT/j/kimi-$q.txt 2>&1; echo "kimi $q rc=$? t=$(( $(date +%s) - start ))"
done
for m in qwen3-235b qwen3-30b gpt-oss-120b; do
  left=$(( 540 - ($(date +%s) - start) )); [ $left -gt 40 ] || break
  [ $left -gt 100 ] && left=100
  timeout $left .carry/bin/fp4moe bench --all --model $m --check --json $OUT/j/2026-12-01-h200-v30-$m.json > $OUT/j/$m.txt 2>&1; echo "$m rc=$? t=$(( $(date +%s) - start ))"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
