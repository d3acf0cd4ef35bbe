#!/usr/bin/env bash
# Prepared in v34 (carry [".carry/z52"]: main 70f06ab's CLI, sm_90a). The README's tables are
# v30 / v31's; since then the permute in one CTA, the token tile's spill limits (v33) and MXFP4's
# wgmma threshold of 22 rows (v34) were merged, each measured by A/B only. Full JSON runs (--all:
# W4A16 and W4A4 where NVFP4, T = 1 ... 16384, --check), in two calls:
#   bash prepared-table.sh small   (~400 s): qwen3-30b, qwen3-235b, gpt-oss-120b
#   bash prepared-table.sh large   (~450 s): kimi-k2, deepseek-v3, each quantization apart (as v30)
# JSONs: $OUT/j/<date>-h200-v35-<preset>[-<quant>].json (copy them to bench/results/, then
# scripts/roofline.py and scripts/bench_table.py for the README).
set -u
source scripts/device_lib.sh
mkdir -p $OUT/j
unxz .carry/z52/cli.xz .carry/bin/fp4moe
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
# one run: preset $1, JSON name $2, at most $3 s, the rest of the bench flags after
one() {
  local m=$1 name=$2 cap=$3 left
  shift 3
  left=$(( 545 - ($(date +%s) - start) )); [ $left -gt 60 ] || return 0
  [ $left -gt $cap ] && left=$cap
  timeout $left .carry/bin/fp4moe bench --model $m --check --json $OUT/j/$(date +%F)-h200-v35-$name.json "$@" \
    > $OUT/j/$name.txt 2>&1
  echo "$name rc=$? t=$(( $(date +%s) - start ))"
}
if [ "${1:-small}" = small ]; then
  for m in qwen3-30b qwen3-235b gpt-oss-120b; do one $m $m 170 --all; done
else
  for m in kimi-k2 deepseek-v3; do
    for q in w4a16 w4a4; do one $m $m-$q 140 --quant $q --tokens 1,8,32,128,512,2048,8192,16384; done
  done
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
