#!/usr/bin/env bash
# v31 call 3, main fa80bff (requant-fast merged; the `main` CLI of .carry/z44, sm_90a): the
# full JSON runs of the rows the merge changes: qwen3-30b and qwen3-235b (--all: W4A16 and
# W4A4), then kimi-k2 and deepseek-v3 W4A4, each with --check, as far as the time allows.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/j
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z44/main.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
for m in qwen3-30b qwen3-235b; do
  left=$(( 540 - ($(date +%s) - start) )); [ $left -gt 40 ] || break
  [ $left -gt 110 ] && left=110
  timeout $left .carry/bin/fp4moe bench --all --model $m --check --json $OUT/j/2026-12-01-h200-v31-$m.json > $OUT/j/$m.txt 2>&1; echo "$m rc=$? t=$(( $(date +%s) - start ))"
done
T=1,8,32,128,512,2048,8192,16384
for m in kimi-k2 deepseek-v3; do
  left=$(( 545 - ($(date +%s) - start) )); [ $left -gt 60 ] || break
  [ $left -gt 150 ] && left=150
  timeout $left .carry/bin/fp4moe bench --model $m --quant w4a4 --tokens $T --check --json $OUT/j/2026-12-01-h200-v31-$m-w4a4.json > $OUT/j/$m-w4a4.txt 2>&1; echo "$m w4a4 rc=$? t=$(( $(date +%s) - start ))"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
