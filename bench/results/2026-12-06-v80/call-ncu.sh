#!/usr/bin/env bash
# v80: every kernel of one forward under ncu (serialized, --clock-control none), main's CLI
# (.carry/lw/cli.xz) and branch hshift's (.carry/hs/cli.xz), at the fast path's points: the
# ALU / FMA pipes and issue slots the decode takes, and the kernels' times alone.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/lw/cli.xz .carry/bin/fp4moe_main || exit 1
unxz .carry/hs/cli.xz .carry/bin/fp4moe_hs || exit 1
base=$OUT
for p in ${POINTS:-kimi-k2@8 deepseek-v3@128 kimi-k2@512}; do
  for v in main hs; do
    mkdir -p "$base/$v"
    OUT=$base/$v ncu_points ".carry/bin/fp4moe_$v" "$p" ${LIMIT:-500}
    cat "$base/$v/breakdown.txt" >> "$base/breakdown-$v.txt"; rm -f "$base/$v/breakdown.txt"
    mv "$base/$v/ncu.tgz" "$base/$v/ncu-${p//@/-}.tgz" 2>/dev/null
  done
done
(cd "$base" && tar czf ncu-all.tgz main hs && rm -rf main hs)
echo "t=$(( $(date +%s) - start ))"
