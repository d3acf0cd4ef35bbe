#!/usr/bin/env bash
# v92: the README's table on main's kernels (kperm, fhoist and kaddr merged since v81's table; carry
# .carry/v92/cli.xz). PART=short (~470 s: --warmup-ms 0, --check, the bf16 cuBLAS baseline) or
# PART=sustained (~300 s: --warmup-ms 2000). The JSONs' tag names the card the call got.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v92/cli.xz .carry/bin/fp4moe || exit 1
table "${PART:-short}" .carry/bin/fp4moe v92
rm -rf "$OUT/j"  # in j-RUN.tgz (a call returns at most 8 files)
echo "t=$(( $(date +%s) - start ))"
# v92: the LDS table decode's probe (bench/probes/rs_overlap.cu modes 7-9), when carried.
if [ "${PROBE:-1}" = 1 ] && [ -f .carry/v92/rs_overlap ]; then
  chmod +x .carry/v92/rs_overlap
  timeout 90 .carry/v92/rs_overlap 6000 lds > "$OUT/probe-lds.txt" 2>&1; echo "probe rc=$?"
  cuobjdump --dump-sass .carry/v92/rs_overlap | python3 bench/results/2026-12-07-v92/sass_counts.py \
    | sort -t'|' -k2,2n -k3,3n -k4,4n > "$OUT/probe-sass.txt"
  cat "$OUT/probe-lds.txt" "$OUT/probe-sass.txt"
  echo "t=$(( $(date +%s) - start ))"
fi
