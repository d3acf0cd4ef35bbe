#!/usr/bin/env bash
# Prepared in v53 (carry [".carry/t53"]: main 884c9d3's test binary, sm_90a, stripped; timeout_s
# 300, ~170 s). v53's call 4 meant to run the new layer case (FP4MOE_SM80_INSIDE_MIN_KB past any
# K gives the default's bits) but its filter `CudaLayer*` missed `Table/CudaLayerConformance.*`.
# Here: the whole test binary, EP apart, and that case's lines. .carry missing? `ninja -C
# build-carry -j2 fp4moe_tests` (sm_90a Release), `strip -o`, `xz -T2 -6` into .carry/t53/tests.xz.
set -u
source scripts/device_lib.sh
unxz .carry/t53/tests.xz .carry/bin/fp4moe_tests
suite_shards
.carry/bin/fp4moe_tests --gtest_list_tests --gtest_filter='*CudaLayerConformance*' | grep -c "^  " \
  | sed 's/^/conformance cases listed: /'
