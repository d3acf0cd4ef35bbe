#!/usr/bin/env bash
# v38 call 4 (carry [".carry/z66"]: branch decode-fit's CLI, the split by whole waves as the rule):
# the T = 1 rows of the README tables again, every preset and quantization, with the ceilings
# measured in each process and --check.
set -u
source scripts/device_lib.sh
unxz .carry/z66/cli.xz .carry/bin/fp4moe
for mq in qwen3-30b:w4a16 qwen3-235b:w4a16 gpt-oss-120b:w4a16 qwen3-30b:w4a4 qwen3-235b:w4a4 kimi-k2:w4a16 deepseek-v3:w4a16 kimi-k2:w4a4 deepseek-v3:w4a4; do
  ok 270 || break
  IFS=: read -r m q <<< "$mq"
  timeout 60 .carry/bin/fp4moe bench --model $m --quant $q --tokens 1 --check --no-baseline --json $OUT/t1-$m-$q.json \
    > $OUT/t1-$m-$q.txt 2>&1
  echo "$m $q: $(grep -E '^ +1 ' $OUT/t1-$m-$q.txt | tr -s ' ')"
done
echo "end t=$(( $(date +%s) - start ))"
