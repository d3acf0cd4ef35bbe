#!/usr/bin/env bash
# Static SASS counts of the library's CUDA kernels, to compare builds without a GPU.
#
#   scripts/sass.sh [BUILD_DIR] [FILTER] [--dump]
#
# For every kernel whose demangled name contains FILTER (default: all), in every CUDA object of
# BUILD_DIR (default: build): its SASS instructions, and of them the MMAs (HMMA, HGMMA),
# divergent-branch regions (BSSY), MUFU, local-memory spills (LDL, STL) and calls. --dump also
# writes each kernel's SASS to BUILD_DIR/sass/<object>.sass.
#
# cuobjdump and nvdisasm come from the CUDA toolkit where it has them. Otherwise they come from the
# PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, downloaded once into .tools/
# (git-ignored). These are tools for reading builds only; nothing links against them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
filter=${2:-}
dump=${3:-}
[ -d "$build/CMakeFiles" ] || { echo "sass.sh: no CMake build in '$build'" >&2; exit 2; }

tools=.tools/cuda-sass
find_tool() {  # name -> path, or empty
  command -v "$1" 2>/dev/null || { [ -x "$tools/$1" ] && echo "$tools/$1"; } || true
}
if [ -z "$(find_tool cuobjdump)" ] || [ -z "$(find_tool nvdisasm)" ]; then
  mkdir -p "$tools"
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps -d "$tmp" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
  for whl in "$tmp"/*.whl; do python3 -m zipfile -e "$whl" "$tmp/x"; done
  for t in cuobjdump nvdisasm; do
    cp "$(find "$tmp/x" -name "$t" -type f | head -1)" "$tools/$t"
    chmod +x "$tools/$t"
  done
  rm -rf "$tmp"
fi
cuobjdump=$(find_tool cuobjdump)
export PATH="$(dirname "$(find_tool nvdisasm)"):$PATH"

[ -n "$dump" ] && mkdir -p "$build/sass"
printf '%-8s %5s %5s %5s %5s %5s %5s  %s\n' insts mma bssy mufu ldl stl call kernel
find "$build/CMakeFiles" -name '*.cu.o' | sort | while read -r obj; do
  sass=$("$cuobjdump" -sass "$obj" 2>/dev/null) || continue
  [ -n "$dump" ] && printf '%s\n' "$sass" > "$build/sass/$(basename "$obj" .cu.o).sass"
  printf '%s\n' "$sass" | awk '
    /Function : / { if (name != "") print n, mma, bssy, mufu, ldl, stl, call, name
                    name = $3; n = mma = bssy = mufu = ldl = stl = call = 0; next }
    /^[ \t]+\/\*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]+\*\// { n++
      if ($0 ~ /HMMA|HGMMA/) mma++
      if ($0 ~ /BSSY/) bssy++
      if ($0 ~ /MUFU/) mufu++
      if ($0 ~ /[ \t]LDL/) ldl++
      if ($0 ~ /[ \t]STL/) stl++
      if ($0 ~ /CALL/) call++ }
    END { if (name != "") print n, mma, bssy, mufu, ldl, stl, call, name }'
done | while read -r n mma bssy mufu ldl stl call name; do
  pretty=$(c++filt "$name" 2>/dev/null || echo "$name")
  pretty=${pretty//fp4moe::cuda::/}
  pretty=${pretty//(anonymous namespace)::/}
  case "$pretty" in *"$filter"*) printf '%-8s %5s %5s %5s %5s %5s %5s  %s\n' "$n" "$mma" "$bssy" "$mufu" "$ldl" "$stl" "$call" "$pretty" ;; esac
done
