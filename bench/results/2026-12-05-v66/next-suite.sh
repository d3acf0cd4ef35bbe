#!/usr/bin/env bash
# Prepared in v66 (no device lent): the third call of the next device session, after
# 2026-12-04-v64/next-tmab.sh (PART=ab) and 2026-12-04-v65/next-probe.sh. Main's whole GPU suite
# has not run since v63's kernels: since then prepare's CUDA pointer check, the host alignment
# rule, the bench's clock line (v65) and the CPU backend's rewrite (v66) landed; the Python suite
# last ran on a GPU in v62.
# Carry .carry/mn66: tests.xz, cli.xz (main 9d02a85's fp4moe_tests and fp4moe, sm_90a, stripped,
# xz; scripts/build_gpu_carry.sh) and the cp312 sm_90a wheel, built by
#   PYENV_VERSION=3.12.1 python3.12 -m pip wheel --no-build-isolation --no-deps \
#     -Ccmake.define.FP4MOE_CUDA=ON -Ccmake.define.FP4MOE_CUDA_ARCHS=90a \
#     -Cbuild-dir=build-python/wheel-cp312-90a -w .carry/mn66 .
# ~460 s: the suite in 8 shards, EP apart (~280 s), bench --check at seven points (four processes) with the clock
# line (~60 s), pytest from the wheel (~120 s).
set -u
source scripts/device_lib.sh
unxz .carry/mn66/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/mn66/cli.xz .carry/bin/fp4moe || exit 1
ln -sf fp4moe .carry/bin/fp4moe_main
suite_shards
check_points main "kimi-k2:w4a16:1,32,512 deepseek-v3:w4a4:8,2048 qwen3-30b:w4a16:16384 gpt-oss-120b:w4a16:128"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/mn66/*.whl || exit 1
root=$PWD
(cd "$(mktemp -d)" && PYTHONPATH=/tmp/site timeout 300 python3 -m pytest -q -p no:cacheprovider -rs --rootdir "$root" \
  "$root/tests/python" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?")
grep -E "passed|failed|SKIPPED|Error" "$OUT/pytest.log" | tail -8
echo "t=$(( $(date +%s) - start ))"
