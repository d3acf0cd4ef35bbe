#!/usr/bin/env bash
# v84 (same as v83 call-ab.sh): three variants under the H200's power cap, from two binaries (carry .carry/v82/cli.xz,
# main 3d1e603's kernels, and .carry/v83/fhp-cli.xz, branch probe-scale1 = fhoist + the probe):
#   main  main's fast path
#   fh    branch fhoist: the k loop's per-thread offsets and decode constants kept in registers
#         (8-token tiles 1,184 -> 1,152 SASS instructions a trip, 16-token 589 for main's 773 loop)
#   fhp   fhoist + timing probe probe-scale1 (FP4MOE_PROBE_SCALE1=1, WRONG results, so never
#         --check): every k-step of a fragment block takes k-step 0's scale pair, built once per
#         block, as a k-permuted weight layout would allow (8-token 1,152 -> 1,051, 16-token 589 -> 542; rsws4 width 6 172 -> 160 per two k-blocks)
# First one fhp process with --check, which must FAIL (the probe is on); then rounds point by
# point after 2 s of replays, round 1 with --check for main and fh, the SM clock logged.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v82/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/v83/fhp-cli.xz .carry/bin/fp4moe_fh || exit 1
cat > .carry/bin/fp4moe_fhp <<SH
#!/bin/sh
for a; do shift; [ "\$a" = --check ] && a=--no-check; set -- "\$@" "\$a"; done
FP4MOE_PROBE_SCALE1=1 exec $PWD/.carry/bin/fp4moe_fh "\$@"
SH
chmod +x .carry/bin/fp4moe_fhp
FP4MOE_PROBE_SCALE1=1 timeout 60 .carry/bin/fp4moe_fh bench --model kimi-k2 --quant w4a16 --tokens 8 --iters 5 --check \
  --no-baseline --no-ceilings --warmup-ms 0 > "$OUT/probe-check.txt" 2>&1
echo "probe --check rc=$? (must fail): $(grep -i -E 'check|FAIL|PASS' "$OUT/probe-check.txt" | head -3 | tr '\n' ' ')"
ab_session ${AB_START:-300} ${AB_STOP:-400} "main fh fhp" "${SPECS:-kimi-k2:w4a16:8 deepseek-v3:w4a16:128 kimi-k2:w4a16:32 kimi-k2:w4a16:128 kimi-k2:w4a16:512 kimi-k2:w4a16:2048}"
echo "t=$(( $(date +%s) - start ))"
