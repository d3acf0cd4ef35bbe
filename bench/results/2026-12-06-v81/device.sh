#!/usr/bin/env bash
# v81: the whole table on main's kernels since v80's hshift merge (.carry/v81/cli.xz: main
# 6db6614, sm_90a, stripped; its kernels are .carry/hs's, the merged SASS the tested 4b334f0's),
# then main's tests (.carry/v81/tests.xz). Carry [".carry/v81/cli.xz"] for the table,
# [".carry/v81/tests.xz"] for PART=tests.
#   PART=short     (~470 s) --warmup-ms 0, --check, the bf16 cuBLAS baseline
#   PART=sustained (~300 s) --warmup-ms 2000
#   PART=tests     (CALL_S, 540) the GPU decode tests (new in v81) and memcheck over them, the
#                  whole test binary, EP apart (8 shards, ~260 s), then racecheck over the
#                  narrow width cases not in RACE_DONE, one at a time, as time allows (v81 did
#                  not run this part; the next session can: carry [".carry/v81/tests.xz"])
# The JSONs' tag names the card the call got.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
case "${PART:-short}" in
  short|sustained)
    unxz .carry/v81/cli.xz .carry/bin/fp4moe || exit 1
    table "${PART:-short}" .carry/bin/fp4moe v81 ;;
  tests)
    unxz .carry/v81/tests.xz .carry/bin/fp4moe_tests || exit 1
    # RACE_DONE: cases already clean on the H200, skipped (v81: narrow_nvfp4 and
    # narrow_mxfp4_swiglu_bias_batched; narrow_w4a4 was cut off by the budget).
    RACE_DONE=${RACE_DONE-narrow_nvfp4 narrow_mxfp4_swiglu_bias_batched} main_tests ${CALL_S:-540} ;;
esac
rm -rf "$OUT/j"  # in j-RUN.tgz (a call returns at most 8 files)
echo "t=$(( $(date +%s) - start ))"
