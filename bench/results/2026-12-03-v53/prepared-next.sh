#!/usr/bin/env bash
# Prepared in v53 (carry [".carry/t53"]: main 825b895's test binary, sm_90a, stripped; timeout_s
# 300, ~180 s). Main's tests not yet run on a GPU: the layer case FP4MOE_SM80_INSIDE_MIN_KB past
# any K (v53's call 4 filter `CudaLayer*` missed `Table/CudaLayerConformance.*`) and the tile
# tests with K a whole number of k-blocks (424c064). prepared-next-1.sh runs them too, in branch
# live16's binary; this one is main's alone (if live16's fails). Here: the whole test binary, EP
# apart. .carry missing? On main, `ninja -C build-carry -j2 fp4moe_tests` (sm_90a Release),
# `strip -o`, `xz -T2 -6` into .carry/t53/tests.xz.
set -u
source scripts/device_lib.sh
unxz .carry/t53/tests.xz .carry/bin/fp4moe_tests
suite_shards
.carry/bin/fp4moe_tests --gtest_list_tests --gtest_filter='*CudaLayerConformance*' | grep -c "^  " \
  | sed 's/^/conformance cases listed: /'
