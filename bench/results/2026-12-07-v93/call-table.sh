#!/usr/bin/env bash
# v93: the README's table on main's kernels (kperm, fhoist and kaddr merged since v81's table; carry
# .carry/v93/cli.xz). PART=short (~470 s: --warmup-ms 0, --check, the bf16 cuBLAS baseline) or
# PART=sustained (~300 s: --warmup-ms 2000). The JSONs' tag names the card the call got.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v93/cli.xz .carry/bin/fp4moe || exit 1
table "${PART:-short}" .carry/bin/fp4moe v93
rm -rf "$OUT/j"  # in j-RUN.tgz (a call returns at most 8 files)
echo "t=$(( $(date +%s) - start ))"
