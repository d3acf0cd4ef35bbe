#!/usr/bin/env bash
# v72: the whole table on main (main's kernels have not changed since v62's requant16; v61's table
# is the README's) and main's test binary and Python package on the GPU. Carry
# [".carry/cli"] for the table (scripts/build_gpu_carry.sh's fp4moe: sm_90a, stripped), [".carry/tests",
# ".carry/whl"] for the suite (its fp4moe_tests as tests.xz, xz -T2 -6; the cp312 sm_90a wheel,
# built by
#   PYENV_VERSION=3.12.1 python3.12 -m pip wheel --no-build-isolation --no-deps \
#     -Ccmake.define.FP4MOE_CUDA=ON -Ccmake.define.FP4MOE_CUDA_ARCHS=90a \
#     -Cbuild-dir=build-python/wheel-cp312-90a -w .carry/whl .
# Three calls, each within 30 s of the last:
#   PART=short     (~470 s) RUN short: --warmup-ms 0, --check, the bf16 cuBLAS baseline
#   PART=sustained (~300 s) RUN sustained: --warmup-ms 2000 (EXTRA=--check: and the check, ~400 s)
#   PART=suite     (~450 s) the pointer tests (the last-byte check is new), memcheck over the new
#                  one, the whole test binary, EP apart, in 8 shards, pytest from the wheel
#   PART=pointers  (~40 s) the pointer tests and memcheck / racecheck over the new one (carry
#                  [".carry/tests"])
# A call that names nvidia-h200 without needs_h200 may run on an H100 (v72's third call did): the
# JSONs' tag names the GPU the call got, and SESSION (default v72) the session.
set -u
source scripts/device_lib.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$gpu" in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=gpu ;; esac
case "${PART:-short}" in
  short)     WARM_MS=0 EXTRA=--check BASELINE=1 TABLE_BUDGET_S=${TABLE_BUDGET_S:-540} \
               full_table short .carry/cli/fp4moe "$(date +%F)-$card-${SESSION:-v72}" ;;
  sustained) WARM_MS=2000 EXTRA=${EXTRA-} TABLE_BUDGET_S=${TABLE_BUDGET_S:-480} \
               full_table sustained .carry/cli/fp4moe "$(date +%F)-$card-${SESSION:-v72}" ;;
  suite)
    [ -x .carry/bin/fp4moe_tests ] || unxz .carry/tests/tests.xz .carry/bin/fp4moe_tests || exit 1
    timeout 120 .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.ForwardTakes*:CudaLayer.ForwardRefuses*:ApiValidate.*:ApiRoute*:PrepareTensor.*' \
      > "$OUT/pointer-tests.txt" 2>&1; echo "pointer tests rc=$?"
    grep -E "^\[ +(OK|FAILED|SKIPPED) +\] Cuda|PASSED|FAILED|Skipped|skipped" "$OUT/pointer-tests.txt" | head -12
    sanitizers 'CudaLayer.ForwardRefuses*' 90
    suite_shards
    pytest_wheel .carry/whl/*.whl 240 ;;
  pointers)  # (~40 s) the pointer tests again after call 1's failure (prepare's test) and skip (the new one) were fixed
    unxz .carry/tests/tests.xz .carry/bin/fp4moe_tests || exit 1
    timeout 120 .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.ForwardTakes*:CudaLayer.ForwardRefuses*:ApiValidate.*:ApiRoute*:PrepareTensor.*' \
      > "$OUT/pointer-tests.txt" 2>&1; echo "pointer tests rc=$?"
    grep -E "^\[ +(OK|FAILED|SKIPPED) +\] Cuda|PASSED|FAILED|Skipped|skipped|Failure" "$OUT/pointer-tests.txt" | head -12
    sanitizers 'CudaLayer.ForwardRefuses*' 90 ;;
esac
echo "t=$(( $(date +%s) - start ))"
