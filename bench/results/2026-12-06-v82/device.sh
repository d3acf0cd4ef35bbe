#!/usr/bin/env bash
# v82: main 3d1e603 on the GPU (its kernels are those of v81's table, 6db6614). Binaries:
# .carry/v82/{cli,tests}.xz (sm_90a, stripped). Carry [".carry/v82/cli.xz"] for the table,
# [".carry/v82/tests.xz"] for PART=tests, [".carry/include"] for PART=python.
#   PART=short     (~470 s) --warmup-ms 0, --check, the bf16 cuBLAS baseline
#   PART=sustained (~300 s) --warmup-ms 2000
#   PART=tests     (CALL_S, 540) the GPU decode tests and memcheck over them, the whole test
#                  binary, EP apart (8 shards, ~260 s), then racecheck over the narrow width
#                  cases not in RACE_DONE, one at a time, as time allows
#   PART=python    the package built from this tree (pip, sm_90a) and its pytest suite
# The JSONs' tag names the card the call got.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
case "${PART:-short}" in
  short|sustained)
    unxz .carry/v82/cli.xz .carry/bin/fp4moe || exit 1
    table "${PART:-short}" .carry/bin/fp4moe v82 ;;
  tests)
    unxz .carry/v82/tests.xz .carry/bin/fp4moe_tests || exit 1
    # RACE_DONE: cases already clean on the H200, skipped (v81: narrow_nvfp4 and
    # narrow_mxfp4_swiglu_bias_batched; narrow_w4a4 was cut off by the budget).
    RACE_DONE=${RACE_DONE-narrow_nvfp4 narrow_mxfp4_swiglu_bias_batched} main_tests ${CALL_S:-540} ;;
  python)
    CPATH=$PWD/.carry/include${CPATH:+:$CPATH} FP4MOE_PYTHON_CUDA=1 FP4MOE_CUDA_ARCHS=90a \
      timeout ${CALL_S:-540} bash scripts/test_python.sh > "$OUT/pytest.log" 2>&1
    echo "python rc=$? $(grep -E 'passed|failed' "$OUT/pytest.log" | tail -1)"
    tail -25 "$OUT/pytest.log" ;;
esac
rm -rf "$OUT/j"  # in j-RUN.tgz (a call returns at most 8 files)
echo "t=$(( $(date +%s) - start ))"
