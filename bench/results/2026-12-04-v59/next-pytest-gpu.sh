#!/usr/bin/env bash
# Prepared in v59: the Python package's pytest suite on the GPU, from a wheel built here (no
# package build on the device). Carry .carry/py60: the cp312 wheel with sm_90a kernels, built by
#   python3.12 -m pip wheel --no-build-isolation --no-deps -Ccmake.define.FP4MOE_CUDA=ON \
#     -Ccmake.define.FP4MOE_CUDA_ARCHS=90a -Cbuild-dir=build-python/wheel-cp312-90a -w .carry/py60 .
# (the device's Python is 3.12). Installs it under /tmp/site and runs tests/python from outside
# the checkout (as scripts/test_python.sh does), so that `import fp4moe` is the wheel. ~120 s.
set -u
source scripts/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/py60/*.whl || exit 1
root=$PWD
cd "$(mktemp -d)"
PYTHONPATH=/tmp/site timeout 420 python3 -m pytest -q -p no:cacheprovider -rs --rootdir "$root" "$root/tests/python" \
  > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"
grep -E "passed|failed|SKIPPED|Error" "$OUT/pytest.log" | tail -15
PYTHONPATH=/tmp/site python3 -c "import fp4moe; print('fp4moe.info():', fp4moe.info())"
echo "t=$(( $(date +%s) - start ))"
