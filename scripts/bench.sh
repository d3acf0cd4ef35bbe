#!/usr/bin/env bash
# Builds fp4moe (Release, build/) and benchmarks the best backend present:
#   GPU visible (nvidia-smi -L): kimi-k2 at 1, 32 and 512 tokens, checked against the reference;
#   no GPU:                      qwen3-30b at 1 and 8 tokens on the host, checked.
# Extra arguments go to `fp4moe bench` (e.g. --json out.json, --skew, --quant w4a4).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C build -j"$(nproc)" fp4moe_cli

build/fp4moe info
echo
if nvidia-smi -L >/dev/null 2>&1; then
  exec build/fp4moe bench --model kimi-k2 --tokens 1,32,512 --check "$@"
else
  # The full qwen3-30b layer (E = 128) on the scalar reference: well under a minute on 2 cores.
  exec build/fp4moe bench --model qwen3-30b --tokens 1,8 --check "$@"
fi
