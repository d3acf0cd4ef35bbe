#!/usr/bin/env bash
# Builds fp4moe (Release, build/) and runs every test: the GoogleTest suite through ctest
# (CUDA tests join it when nvcc is present), then the Python tests when they exist, then the
# host code's suite again under ASan and UBSan (scripts/test_sanitize.sh; FP4MOE_SANITIZE=0
# skips it). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"

# python tests
if [ -d tests/python ] && [ -f scripts/test_python.sh ]; then
  bash scripts/test_python.sh
fi
# the host code under AddressSanitizer and UndefinedBehaviorSanitizer
if [ "${FP4MOE_SANITIZE:-1}" != 0 ]; then
  bash scripts/test_sanitize.sh
fi
echo "test.sh: all tests passed"
