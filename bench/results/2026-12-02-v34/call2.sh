#!/usr/bin/env bash
# v34 call 2 (carry [".carry/z50", ".carry/z51"]; ~430 s): branch pair16's tile and GEMM tests,
# memcheck / racecheck of the forced-tile tests and its whole test binary (prepared-pair16.sh
# tests), then on main 6278165: racecheck of the permute under the new bounds and pytest with
# the package built here.
set -u
bash bench/results/2026-12-02-v33/prepared-pair16.sh tests
source scripts/device_lib.sh
unxz .carry/z51/tests.xz .carry/bin/fp4moe_tests_main
timeout 60 compute-sanitizer --tool racecheck .carry/bin/fp4moe_tests_main --gtest_filter='CudaPermute.*' > $OUT/racecheck-permute.log 2>&1
echo "racecheck permute rc=$? $(grep 'RACECHECK SUMMARY' $OUT/racecheck-permute.log)"
FP4MOE_PYTHON_CUDA=1 FP4MOE_CUDA_ARCHS=90a timeout 240 bash scripts/test_python.sh -q > $OUT/pytest.log 2>&1
echo "pytest rc=$? $(tail -1 $OUT/pytest.log)"
echo "t=$(( $(date +%s) - start ))"
