#!/usr/bin/env bash
# v80: branch hshift (carry .carry/hs: cli.xz, tests.xz) against main's kernels (.carry/lw cli.xz)
# under the power cap. hshift moves the weight decode's two selector shifts per word (sel >> 16)
# from the ALU pipe to the FMA pipe (HMUL2 .H1_H1 by one) in the mma.sync kernels (fast path,
# decode kernels). First the fast path's and the decode kernels' GEMM tests of the branch, then
# rounds point by point after 2 s of replays, round 1 with --check, the SM clock logged.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/lw/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/hs/cli.xz .carry/bin/fp4moe_hs || exit 1
# TESTS=none: no tests, and no tests archive needed (v80's call 3 carried none and stopped here).
if [ "${TESTS:-}" != none ]; then
  unxz .carry/hs/tests.xz .carry/bin/fp4moe_tests || exit 1
  filter_tests "${TESTS:-CudaGemmSm80Tiles/*:CudaGemmDecodeSplitCounts/*:CudaGemmLayout.*}" gemm-tests ${TESTS_S:-150} | tee "$OUT/tests-summary.txt"
fi
# What has run so far, every 20 s, in case the call is cut short (at most 8 files come back).
( while sleep 20; do (cd "$OUT" && tar czf ab-partial.tgz ab clocks.csv 2>/dev/null); done ) &
partial_pid=$!
clocks_start 200
ab_rounds_by_point ${AB_START:-430} ${AB_STOP:-520} "main hs" "${SPECS:-kimi-k2:w4a16:8 deepseek-v3:w4a16:128 kimi-k2:w4a16:1 qwen3-30b:w4a16:32}"
clocks_stop
kill $partial_pid
ab_report main | tee "$OUT/ab-summary.txt"
python3 - "$OUT/clocks.csv" <<'PY' | tee -a "$OUT/ab-summary.txt"
import sys, statistics
mhz = [int(l.split(',')[1].split()[0]) for l in open(sys.argv[1]) if 'MHz' in l]
w = [float(l.split(',')[2].split()[0]) for l in open(sys.argv[1]) if ' W' in l]
print(f"SM clock median {statistics.median(mhz)} MHz over {len(mhz)} samples; power median {statistics.median(w):.0f} W")
PY
echo "t=$(( $(date +%s) - start ))"
