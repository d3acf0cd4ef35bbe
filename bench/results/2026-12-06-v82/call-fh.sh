#!/usr/bin/env bash
# v82: branch fhoist (carry .carry/v82/fh-cli.xz, fh-tests.xz) against main (.carry/v82/cli.xz,
# 3d1e603) under the power cap. fhoist keeps the fast path's per-thread shared-memory offsets and
# decode constants in registers (reg_fence before the slot loop) where the compiler rebuilt them
# from the thread index in every trip of the k loop: 8-token tiles 1,184 -> 1,152 SASS
# instructions a trip (MX 1,136 -> 1,070). First the branch's fast-path, decode and layout GEMM
# tests, then rounds point by point after 2 s of replays, round 1 with --check, the SM clock logged.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/v82/fh-cli.xz .carry/bin/fp4moe_fh || exit 1
if [ "${TESTS:-}" != none ]; then
  unxz .carry/v82/fh-tests.xz .carry/bin/fp4moe_tests || exit 1
  filter_tests "${TESTS:-CudaGemmSm80Tiles/*:CudaGemmDecodeSplitCounts/*:CudaGemmLayout.*}" gemm-tests ${TESTS_S:-120} | tee "$OUT/tests-summary.txt"
fi
( while sleep 20; do (cd "$OUT" && tar czf ab-partial.tgz ab clocks.csv 2>/dev/null); done ) &
partial_pid=$!
clocks_start 200
ab_rounds_by_point ${AB_START:-430} ${AB_STOP:-540} "main fh" "${SPECS:-kimi-k2:w4a16:8 deepseek-v3:w4a16:128 kimi-k2:w4a16:32 gpt-oss-120b:w4a16:32 kimi-k2:w4a16:128}"
clocks_stop
kill $partial_pid
ab_report main | tee "$OUT/ab-summary.txt"
python3 - "$OUT/clocks.csv" <<'PY' | tee -a "$OUT/ab-summary.txt"
import sys, statistics
mhz = [int(l.split(',')[1].split()[0]) for l in open(sys.argv[1]) if 'MHz' in l]
w = [float(l.split(',')[2].split()[0]) for l in open(sys.argv[1]) if ' W' in l]
print(f"SM clock median {statistics.median(mhz)} MHz over {len(mhz)} samples; power median {statistics.median(w):.0f} W")
PY
rm -f "$OUT/ab-partial.tgz"
echo "t=$(( $(date +%s) - start ))"
