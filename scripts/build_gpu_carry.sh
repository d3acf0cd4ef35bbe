#!/usr/bin/env bash
# Builds the GPU binaries on this machine (sm_90a only, static cudart) and puts them in
# .carry/bin, the git-ignored folder that travels to the GPU machine with `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-carry -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a >/dev/null
ninja -C build-carry -j"${JOBS:-2}" fp4moe_tests fp4moe_cli
mkdir -p .carry/bin
cp build-carry/fp4moe_tests build-carry/fp4moe .carry/bin/
strip .carry/bin/* 2>/dev/null || true
du -sh .carry/bin/*
# headers the Python build on the GPU machine needs and cannot install there
mkdir -p .carry/include
cp -r /usr/include/nlohmann .carry/include/
