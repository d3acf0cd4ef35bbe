#!/usr/bin/env bash
# Builds the host code (the CPU backend, the reference, the API, the checkpoint reader, the
# CLI; no CUDA, no EP) with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-sanitize/ and runs its ctest suite: any out-of-bounds access, use after free, leak or
# undefined operation fails the test it happens in, the CLI's included (ctest runs the
# sanitized binary). Called by scripts/test.sh (FP4MOE_SANITIZE=0 skips it there); about 4
# minutes to build and 4 to run on 2 cores. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFP4MOE_CUDA=OFF -DFP4MOE_EP=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
ninja -C build-sanitize -j"$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" --timeout 900
echo "test_sanitize.sh: all tests passed under ASan and UBSan"
