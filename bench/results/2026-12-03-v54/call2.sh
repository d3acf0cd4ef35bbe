#!/usr/bin/env bash
# v54 call 2 (carry [".carry/m54", ".carry/l16b"]: main 5d51ead's CLI and branch live16's, sm_90a,
# stripped; timeout_s 600). Main against live16 where the 16-token tiles run: kimi-k2 T = 384 /
# 512, deepseek-v3 T = 256 / 384, qwen3-235b and qwen3-30b T = 128 / 192, gpt-oss-120b T = 256 /
# 384; kimi-k2 T = 32 (8-token tiles, the same kernels) as the control. Point-major, 2 s of replays
# before each point, --check in round 1 (both variants).
set -u
source scripts/device_lib.sh
unxz .carry/m54/cli.xz .carry/bin/fp4moe_main
unxz .carry/l16b/cli.xz .carry/bin/fp4moe_live16
clocks_start 200
ab_rounds_by_point ${ROUND_S:-430} ${POINT_S:-510} "main live16" \
  "kimi-k2:w4a16:32,384,512 kimi-k2:w4a4:512 deepseek-v3:w4a16:256,384 qwen3-235b:w4a16:128,192 qwen3-235b:w4a4:128 qwen3-30b:w4a16:128,192 qwen3-30b:w4a4:128 gpt-oss-120b:w4a16:256,384"
clocks_stop
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
(cd $OUT && gzip -f clocks.csv)
