#!/usr/bin/env bash
# v93: the whole test binary on main (carry .carry/v93/tests.xz), EP apart, 8 shards (~200-280 s),
# beside the Python suite from v91's cp312 sm_90a wheel when carried (.carry/whl91: main's code,
# only a comment changed in src since): the H200 has run neither since v77 (910 of 910; pytest
# 169 passed); H100s since (v92: 922 passed, 142 skipped; v91: pytest 182 passed, 4 skipped).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v93/tests.xz .carry/bin/fp4moe_tests || exit 1
if ls .carry/whl91/*.whl > /dev/null 2>&1; then pytest_wheel .carry/whl91/*.whl ${PY_S:-260} > "$OUT/pytest-summary.txt" 2>&1 & fi
suite_shards
wait
cat "$OUT/pytest-summary.txt" 2>/dev/null
echo "t=$(( $(date +%s) - start ))"
