#!/usr/bin/env bash
# v53 call 4 (carry [".carry/lf53", ".carry/t53"]: branch ldfull's CLI, aeb4242, and the merge cd9864c's test binary; timeout_s 330): the README's
# rows the fast path runs (T = 8 / 32 / 128), every preset, W4A16 and W4A4, sustained then short,
# as the call's first work (as v51's table: call 3's sustained rows ran after 3 minutes of A/B
# load, at a lower settled clock). No check (calls 1 and 3 passed it on this CLI's kernels).
set -u
source scripts/device_lib.sh
unxz .carry/lf53/cli.xz .carry/bin/fp4moe_lf
clocks_start 200
for timing in sustained:2000 short:0; do
  name=${timing%%:*}; ms=${timing##*:}
  mkdir -p $OUT/j-$name
  for m in kimi-k2 deepseek-v3 qwen3-235b qwen3-30b gpt-oss-120b; do
    ok 215 || break
    mark $name $m
    timeout 100 .carry/bin/fp4moe_lf bench --model $m --all --tokens 8,32,128 --warmup-ms $ms \
      --no-check --no-baseline --json $OUT/j-$name/$(date +%F)-h200-v53-$name-$m.json > $OUT/j-$name/$m.txt 2>&1
    echo "$name $m rc=$? t=$(( $(date +%s) - start ))"
  done
  (cd $OUT && tar czf j-$name.tgz j-$name)
done
clocks_stop
# the layer's conformance cases on the merge (its new case: FP4MOE_SM80_INSIDE_MIN_KB past any K,
# the same bits as the default)
unxz .carry/t53/tests.xz .carry/bin/fp4moe_tests
test_shards 'CudaLayer*' 90
python3 scripts/bench_table.py $OUT/j-sustained/*.json 2>&1 | grep -E "^### |^\| [0-9]" | awk -F'|' '/^### /{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
rm -rf $OUT/j-sustained $OUT/j-short
