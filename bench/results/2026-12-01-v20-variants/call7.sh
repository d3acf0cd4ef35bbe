#!/usr/bin/env bash
# qwen3-30b's row of the table on 5948d54's binary, W4A16 then W4A4, with the ceilings and the bf16 baseline.
set -u
start=$(date +%s)
Z=.carry/z11; gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/b
T=1,8,32,128,512,2048,8192,16384
timeout 120 $Z/b bench --model qwen3-30b --tokens $T --check --json $OUT/q30-w4a16.json > $OUT/q30-w4a16.txt 2>&1; echo "rc=$?" >> $OUT/q30-w4a16.txt
left=$(( 235 - ($(date +%s) - start) ))
[ $left -gt 30 ] && { timeout $left $Z/b bench --model qwen3-30b --quant w4a4 --tokens $T --check --json $OUT/q30-w4a4.json > $OUT/q30-w4a4.txt 2>&1; echo "rc=$?" >> $OUT/q30-w4a4.txt; }
echo "t=$(( $(date +%s) - start )) s"
for f in $OUT/*.txt; do echo "== $f"; grep -E "ceilings|^ +[0-9]+ |rc=" $f; done
