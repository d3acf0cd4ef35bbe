#!/usr/bin/env bash
# Prepared in v49 (carry [".carry/r49"]: main's sm_90a CLI and test binary, stripped, built after
# the review that moved both route kernels' group scan into group_score: that refactor has not
# run on a GPU, and CudaRouting in the suite below checks it bit for bit). ~520 s, timeout_s
# 600: main's whole test binary, EP apart, in 8 shards (suite_shards), then `route us` (and the
# layer, `--check`) at T = 1 / 16384 on the five presets, which v49 timed on two only.
# .carry/r49 missing (a fresh checkout)? Build main (`ninja -C build-carry -j2 fp4moe_cli
# fp4moe_tests`, sm_90a Release), `strip -o` each of build-carry/fp4moe and fp4moe_tests and
# `xz -T2 -6` them into .carry/r49/cli.xz and tests.xz.
set -u
source scripts/device_lib.sh
unxz .carry/r49/tests.xz .carry/bin/fp4moe_tests
unxz .carry/r49/cli.xz .carry/bin/fp4moe
suite_shards
echo "suite t=$(( $(date +%s) - start ))"
for m in qwen3-30b gpt-oss-120b qwen3-235b deepseek-v3 kimi-k2; do
  ok 500 || break
  timeout 70 .carry/bin/fp4moe bench --model $m --tokens 1,16384 --iters 30 --warmup 5 --check --no-baseline \
    --no-ceilings > $OUT/route-$m.txt 2>&1
  grep -E '^ +(1|16384) ' $OUT/route-$m.txt | tr -s ' ' | sed "s/^/$m: /" | tee -a $OUT/route.txt
done
echo "done t=$(( $(date +%s) - start ))"
