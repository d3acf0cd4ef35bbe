#!/usr/bin/env bash
# v43 call 4 (carry .carry/z84/cli.xz: main 467b4cd's CLI, the slot search in one load per 256
# experts): the T = 1 and T = 8 rows of the README tables again, every preset and quantization,
# with the ceilings measured in each process and --check.
set -u
source scripts/device_lib.sh
unxz .carry/z84/cli.xz .carry/bin/fp4moe
for mq in qwen3-30b:w4a16 qwen3-235b:w4a16 gpt-oss-120b:w4a16 qwen3-30b:w4a4 qwen3-235b:w4a4 kimi-k2:w4a16 deepseek-v3:w4a16 kimi-k2:w4a4 deepseek-v3:w4a4; do
  ok 300 || break
  IFS=: read -r m q <<< "$mq"
  timeout 70 .carry/bin/fp4moe bench --model $m --quant $q --tokens 1,8 --check --no-baseline --json $OUT/t18-$m-$q.json \
    > $OUT/t18-$m-$q.txt 2>&1
  grep -E '^ +(1|8) ' $OUT/t18-$m-$q.txt | tr -s ' ' | sed "s/^/$m $q: /" | tee -a $OUT/rows.txt
done
(cd $OUT && tar czf t18.tgz t18-* && rm -f t18-*)
echo "end t=$(( $(date +%s) - start ))"
