#!/usr/bin/env bash
# v44 call 5 (carry .carry/z89/cli.xz, main 928ffa1's CLI): kimi-k2 and deepseek-v3 W4A16 at
# T = 8 / 32 / 128 with --check, in the device time left.
set -u
source scripts/device_lib.sh
unxz .carry/z89/cli.xz .carry/bin/fp4moe
for m in kimi-k2 deepseek-v3; do
  ok 120 || break
  timeout 75 .carry/bin/fp4moe bench --model $m --quant w4a16 --tokens 8,32,128 --check --no-baseline \
    --json $OUT/rows-$m-w4a16.json > $OUT/rows-$m-w4a16.txt 2>&1
  grep -E '^ +(8|32|128) ' $OUT/rows-$m-w4a16.txt | tr -s ' ' | sed "s/^/$m w4a16: /" | tee -a $OUT/rows.txt
done
(cd $OUT && tar czf logs.tgz rows-* && rm -f rows-*)
echo "done t=$(( $(date +%s) - start ))"
