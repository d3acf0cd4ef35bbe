#!/usr/bin/env bash
# v67 call 4 (carry [".carry/mu"]: branch multi-unit 428221f's fp4moe_tests and fp4moe, sm_90a,
# stripped, xz), a first look with the budget's last ~250 s: fast-path CTAs over several slots,
# the next slot's first loads before the current epilogue (FP4MOE_SM80_UNITS). Its tests with
# the fast path's tile tests and the layer's conformance table (stops on a failure), then an A/B
# of the same binary at UNITS = 1 (main's launch) / 2 / 4 on the small presets' fast-path rows
# (qwen3-30b T = 32 / 128, gpt-oss-120b T = 32), until ~140 s. Not for a merge: the whole suite,
# the sanitizers and more rounds are the next session's.
set -u
source scripts/device_lib.sh
unxz .carry/mu/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/mu/cli.xz .carry/bin/fp4moe_bin_mu || exit 1
filter_tests '*Sm80Units*:CudaGemmSm80Tiles/*:Table/CudaLayerConformance.*' mu-tests 70
if ! grep -q '^\[  PASSED  \]' "$OUT/mu-tests.txt" || grep -q '^\[  FAILED  \]' "$OUT/mu-tests.txt"; then
  echo "multi-unit tests did not pass: no A/B"; exit 1
fi
for u in 1 2 4; do env_variant u$u .carry/bin/fp4moe_bin_mu "FP4MOE_SM80_UNITS=$u"; done
ab_rounds_by_point 110 135 "u1 u2 u4" "qwen3-30b:w4a16:32,128 gpt-oss-120b:w4a16:32"
ab_report u1
