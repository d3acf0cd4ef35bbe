#!/usr/bin/env bash
# Builds fuzz/fuzz_safetensors (libFuzzer + ASan + UBSan) from the library sources it needs,
# standalone from the CMake build. Usage: fuzz/build.sh [out_dir]   (default: build-fuzz)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-fuzz}
mkdir -p "$out"
CXX=${CXX:-clang++}
flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/src" -I"$root/fuzz" -DFP4MOE_VERSION=\"fuzz\")
# The reader, plus what it links against: fail()/TensorView (src/api/tensor.cpp).
srcs=("$root/src/checkpoint/safetensors.cpp" "$root/src/api/tensor.cpp")
# load_moe_layer, when it is there, with what it calls into (format conversions and the
# tensor checks they use).
if [[ -f $root/src/checkpoint/loaders.cpp ]]; then
  srcs+=("$root/src/checkpoint/loaders.cpp" "$root/src/format/format.cpp" "$root/src/format/quant.cpp"
        "$root/src/api/validate.cpp")
  flags+=(-DFP4MOE_FUZZ_WITH_LOADERS=1)
fi
"$CXX" "${flags[@]}" "${srcs[@]}" "$root/fuzz/fuzz_safetensors.cpp" -o "$out/fuzz_safetensors"
echo "built $out/fuzz_safetensors"
