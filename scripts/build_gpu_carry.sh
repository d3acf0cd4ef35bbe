#!/usr/bin/env bash
# Builds the GPU binaries on this machine (sm_90a only, static cudart) and puts them in
# .carry/bin, the git-ignored folder that travels to the GPU machine with `carry`.
#   PACK=NAME   also writes .carry/NAME/{tests,cli}.xz, stripped and compressed
#               (scripts/pack_carry.py; device_lib.sh's unxz unpacks them there). A call carries
#               at most 64 MiB with the working tree and its .git (~40 MiB of it in v82), so
#               name single .xz files.
#   BOTH=1      with PACK: .carry/NAME/both.{xz,len} instead, both binaries in one stream
#               (pack_carry.py --both; device_lib.sh's unxz_both splits them there)
#   BUILD=DIR   the build folder (build-carry)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-carry}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a >/dev/null
ninja -C "$build" -j"${JOBS:-2}" fp4moe_tests fp4moe_cli
mkdir -p .carry/bin
cp "$build/fp4moe_tests" "$build/fp4moe" .carry/bin/
strip .carry/bin/* 2>/dev/null || true
du -sh .carry/bin/*
if [ -n "${PACK:-}" ]; then
  python3 scripts/pack_carry.py .carry/bin ".carry/$PACK" $([ "${BOTH:-}" = 1 ] && echo --both)
  du -sh ".carry/$PACK"/*
fi
# headers the Python build on the GPU machine needs and cannot install there
mkdir -p .carry/include
cp -r /usr/include/nlohmann .carry/include/
