#!/usr/bin/env bash
# v78: branch early-w (carry .carry/ew) against main's order under the H200's power cap, at the
# two nearest sustained misses only (its tests passed on an H100 in v77: 293 of 293). Rounds
# point by point after 2 s of replays, round 1 with --check, with the SM clock logged.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
unxz .carry/ew/cli.xz .carry/bin/fp4moe_ew || exit 1
env_variant late .carry/bin/fp4moe_ew "FP4MOE_SM80_EARLY_W=0"
env_variant early .carry/bin/fp4moe_ew ""
clocks_start 200
ab_rounds_by_point ${AB_START:-230} ${AB_STOP:-290} "late early" "kimi-k2:w4a16:8 deepseek-v3:w4a16:128"
clocks_stop
ab_report late
python3 - "$OUT/clocks.csv" <<'PY'
import sys, statistics
mhz = [int(l.split(',')[1].split()[0]) for l in open(sys.argv[1]) if 'MHz' in l]
w = [float(l.split(',')[2].split()[0]) for l in open(sys.argv[1]) if ' W' in l]
print(f"SM clock median {statistics.median(mhz)} MHz over {len(mhz)} samples; power median {statistics.median(w):.0f} W")
PY
echo "t=$(( $(date +%s) - start ))"
