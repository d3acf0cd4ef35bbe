#!/usr/bin/env bash
# Installs the fp4moe Python package from this checkout and runs its pytest suite.
#   bash scripts/test_python.sh [pytest args...]
# The CUDA part of the package is built only where a GPU is visible (or FP4MOE_PYTHON_CUDA=1):
# on a machine without one it would compile kernels that no test can run.
#   FP4MOE_CUDA_ARCHS=90a   architectures to compile (default: the CMake default)
#   PYTHON=python3          the interpreter to install into
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

need=()
for mod in nanobind scikit_build_core numpy pytest; do
  "$PY" -c "import $mod" 2>/dev/null || need+=("${mod//_/-}")
done
if [ ${#need[@]} -gt 0 ]; then
  "$PY" -m pip install --quiet "${need[@]}" || { echo "test_python: cannot install ${need[*]}"; exit 1; }
fi

cuda=OFF
if [ "${FP4MOE_PYTHON_CUDA:-}" = 1 ] || { [ -z "${FP4MOE_PYTHON_CUDA:-}" ] && nvidia-smi -L >/dev/null 2>&1; }; then
  cuda=ON
fi
args=(-Ccmake.define.FP4MOE_CUDA=$cuda)
[ -n "${FP4MOE_CUDA_ARCHS:-}" ] && args+=("-Ccmake.define.FP4MOE_CUDA_ARCHS=${FP4MOE_CUDA_ARCHS}")
# a build dir per CUDA setting, so that switching does not reuse a stale cache
args+=("-Cbuild-dir=build-python/cuda-$cuda")

mkdir -p build-python
log=build-python/install-cuda-$cuda.log
echo "== test_python: pip install . (CUDA $cuda)"
if ! "$PY" -m pip install --no-build-isolation --quiet "${args[@]}" . >"$log" 2>&1; then
  tail -40 "$log"
  echo "test_python: FAILED to build/install the package (log: $log)"
  exit 1
fi

# Run from outside the checkout so that `import fp4moe` is the installed package, not python/.
root=$PWD
cd "$(mktemp -d)"
"$PY" -m pytest -q -p no:cacheprovider --rootdir "$root" "$root/tests/python" "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "test_python: FAILED: pytest collected no tests"
  exit 1
fi
[ $rc -eq 0 ] || echo "test_python: FAILED (pytest exit $rc)"
"$PY" -c "import fp4moe; print('fp4moe.info():', fp4moe.info())" || rc=1
exit $rc
