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
    T=.carry/bin/fp4moe_tests
    CALL_S=${CALL_S:-540}
    decode='CudaGemmLayout.FragmentWord*:CudaGemmLayout.HighHalf*'
    filter_tests "$decode" decode 60
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --gtest_filter="$decode" > "$OUT/memcheck-decode.txt" 2>&1
    echo "memcheck decode rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$OUT/memcheck-decode.txt" | tr '\n' ' ')"
    suite_shards
    cases=$($T --gtest_list_tests --gtest_filter='Narrow/CudaGemmSm90Widths.*' | sed -n 's/^  \(WidthSplitAtEveryWidth\/[a-z0-9_]*\).*/\1/p')
    # RACE_DONE: cases already clean on the H200, skipped (v81: narrow_nvfp4 and
    # narrow_mxfp4_swiglu_bias_batched; narrow_w4a4 was cut off by the budget).
    for d in ${RACE_DONE-narrow_nvfp4 narrow_mxfp4_swiglu_bias_batched}; do cases=$(echo "$cases" | grep -vx "WidthSplitAtEveryWidth/$d"); done
    for c in $cases; do
      left=$(( CALL_S - ($(date +%s) - start) ))
      [ $left -lt 20 ] && { echo "racecheck $c: not started (time)"; continue; }
      t0=$(date +%s)
      timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $T \
        --gtest_filter="Narrow/CudaGemmSm90Widths.$c" > /tmp/one.txt 2>&1
      rc=$?
      { echo "==== racecheck $c rc=$rc"; tail -c 20000 /tmp/one.txt; } >> "$OUT/racecheck.txt"
      echo "racecheck $c rc=$rc $(( $(date +%s) - t0 )) s: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' /tmp/one.txt | tr '\n' ' ')"
    done ;;
  python)
    CPATH=$PWD/.carry/include${CPATH:+:$CPATH} FP4MOE_PYTHON_CUDA=1 FP4MOE_CUDA_ARCHS=90a \
      timeout ${CALL_S:-540} bash scripts/test_python.sh > "$OUT/pytest.log" 2>&1
    echo "python rc=$? $(grep -E 'passed|failed' "$OUT/pytest.log" | tail -1)"
    tail -25 "$OUT/pytest.log" ;;
esac
rm -rf "$OUT/j"  # in j-RUN.tgz (a call returns at most 8 files)
echo "t=$(( $(date +%s) - start ))"
