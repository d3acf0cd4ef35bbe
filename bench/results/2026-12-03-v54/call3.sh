#!/usr/bin/env bash
# v54 call 3 (carry [".carry/l16b", ".carry/l16t"]: branch live16's CLI and test binary; timeout_s
# 330): the README's rows where live16's 16-token tiles run (qwen3-235b and qwen3-30b T = 128,
# kimi-k2 T = 512; T = 32 beside them), W4A16 and W4A4, sustained then short, as the call's first
# work; then the two SafetensorsRobust fuzz tests that failed in live16's binary in call 1.
set -u
source scripts/device_lib.sh
unxz .carry/l16b/cli.xz .carry/bin/fp4moe_l16
clocks_start 200
for timing in sustained:2000 short:0; do
  name=${timing%%:*}; ms=${timing##*:}
  mkdir -p $OUT/j-$name
  for mt in kimi-k2:32,512 qwen3-235b:32,128 qwen3-30b:32,128; do
    m=${mt%%:*}; toks=${mt##*:}
    ok 230 || break
    mark $name $m
    timeout 100 .carry/bin/fp4moe_l16 bench --model $m --all --tokens $toks --warmup-ms $ms \
      --no-check --no-baseline --json $OUT/j-$name/$(date +%F)-h200-v54-$name-$m.json > $OUT/j-$name/$m.txt 2>&1
    echo "$name $m rc=$? t=$(( $(date +%s) - start ))"
  done
  (cd $OUT && tar czf j-$name.tgz j-$name)
done
clocks_stop
(cd $OUT && gzip -f clocks.csv)
unxz .carry/l16t/tests.xz .carry/bin/fp4moe_tests
.carry/bin/fp4moe_tests --gtest_filter='SafetensorsRobust.*' 2>&1 | tail -25
python3 scripts/bench_table.py $OUT/j-sustained/*.json 2>&1 | grep -E "^### |^\| [0-9]" | awk -F'|' '/^### /{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
python3 scripts/bench_table.py $OUT/j-short/*.json 2>&1 | grep -E "^### |^\| [0-9]" | awk -F'|' '/^### /{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
rm -rf $OUT/j-sustained $OUT/j-short
