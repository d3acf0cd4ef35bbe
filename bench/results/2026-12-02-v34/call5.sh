#!/usr/bin/env bash
# v34 call 5 (carry [".carry/z51"]: main 6278165's CLI; ~250 s). wgmma (default from 16 rows per
# active expert) against the fast path (FP4MOE_SM90_MIN_ROWS(_MX)=25) at 16 and 18 rows: call 4
# had the fast path faster at 16 rows on three presets and slower at 20 and 24.
set -u
source scripts/device_lib.sh
unxz .carry/z51/cli.xz .carry/bin/fp4moe_def
printf '#!/bin/sh\nFP4MOE_SM90_MIN_ROWS=25 FP4MOE_SM90_MIN_ROWS_MX=25 exec %s "$@"\n' "$PWD/.carry/bin/fp4moe_def" > .carry/bin/fp4moe_fast
chmod +x .carry/bin/fp4moe_fast
for b in def fast; do ok 120 && ab_point $b 1 deepseek-v3 w4a16 576; done
for b in def fast; do ok 150 && ab_point $b 2 kimi-k2 w4a16 768; done
ab_rounds 215 235 "def fast" "qwen3-30b:w4a16:288 qwen3-235b:w4a16:288 gpt-oss-120b:w4a16:576"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
python3 scripts/ab_summary.py $OUT/ab --base def
cd $OUT && tar czf ab.tgz ab && rm -rf ab
