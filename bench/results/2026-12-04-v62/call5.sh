#!/usr/bin/env bash
# v62 call 5: rsws's ring depth. Call 4's bd1 (one stage fewer, its bytes unused) read 0.5-1.5%
# faster than main at three 128-token-tile points. Branch rsws-stages: FP4MOE_RSWS_FEWER = 1 / 2
# stages fewer at kCw 2 (128-token NU 16: 8 -> 7 / 6; the wide widths likewise), shared memory
# shrunk with them. Main: .carry/rq16. A/B, --check in round 1. ~430 s.
set -u
source scripts/device_lib.sh
unxz .carry/rq16/cli.xz .carry/bin/fp4moe_main
unxz .carry/fw1/cli.xz .carry/bin/fp4moe_fw1
unxz .carry/fw2/cli.xz .carry/bin/fp4moe_fw2
ab_rounds_by_point 230 400 "main fw1 fw2" "kimi-k2:w4a16:16384 qwen3-235b:w4a16:16384 qwen3-30b:w4a16:8192 deepseek-v3:w4a16:8192"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
