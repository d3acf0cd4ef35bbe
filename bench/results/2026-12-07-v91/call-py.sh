#!/usr/bin/env bash
# v91: the Python suite on a GPU from main's cp312 sm_90a wheel (carry .carry/whl91, built with
# python3.12 -m pip wheel --no-build-isolation --no-deps . -w .carry/whl91
# -C cmake.define.FP4MOE_CUDA_ARCHS=90a). Not run on a GPU since v85 (kperm); kaddr since.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
pytest_wheel .carry/whl91/*.whl ${PY_S:-280}
echo "t=$(( $(date +%s) - start ))"
