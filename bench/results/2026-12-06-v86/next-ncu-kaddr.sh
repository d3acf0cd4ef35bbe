#!/usr/bin/env bash
# After v86: every kernel of one W4A4 forward under ncu, main's CLI since the kperm merge (carry
# .carry/v85k/cli.xz) and branch kaddr's (.carry/v86a/cli.xz), at points where the staging and
# requantization kernels weigh most: their time, DRAM rate and issue share on both (v62, logical
# rows: the requantization 76 us at qwen3-30b T = 8192, memory time 47). Replaces v85's
# next-ncu.sh. main until MAIN_S (280) s since start, kaddr until CALL_S (560).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v85k/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/v86a/cli.xz .carry/bin/fp4moe_kaddr || exit 1
points=${POINTS:-qwen3-30b@8192@w4a4 deepseek-v3@2048@w4a4}
for v in main kaddr; do
  lim=${CALL_S:-560}
  [ $v = main ] && lim=${MAIN_S:-280}
  ncu_points .carry/bin/fp4moe_$v "$points" "$lim"
  mv "$OUT/breakdown.txt" "$OUT/breakdown-$v.txt" 2>/dev/null
  mv "$OUT/ncu.tgz" "$OUT/ncu-$v.tgz" 2>/dev/null
done
grep -iE "==|staging|nvfp4|rows_kernel" "$OUT"/breakdown-*.txt
echo "t=$(( $(date +%s) - start ))"
