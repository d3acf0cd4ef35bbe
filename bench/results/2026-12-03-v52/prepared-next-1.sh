#!/usr/bin/env bash
# Prepared in v52 (carry [".carry/lf52t", ".carry/lf52"]: branch ldfull's (ea844bc) test binary and
# CLI, sm_90a, stripped; timeout_s 420, ~300 s). Branch ldfull: the fast path's groups inside K
# load without a test per stage, and its NVFP4-activation kernels in files of their own
# (bench/results/2026-12-03-v52/ldfull.diff). Before it can merge:
# the whole test binary, EP apart, on the GPU; then `bench --check` on every preset at the fast
# path's token counts (W4A16 and W4A4). .carry missing? `git checkout ldfull`, `ninja -C
# build-carry -j2 fp4moe_tests fp4moe_cli` (sm_90a Release), `strip -o`, `xz -T2 -6` into
# .carry/lf52t/tests.xz and .carry/lf52/cli.xz.
set -u
source scripts/device_lib.sh
unxz .carry/lf52t/tests.xz .carry/bin/fp4moe_tests
suite_shards
unxz .carry/lf52/cli.xz .carry/bin/fp4moe
for spec in kimi-k2:w4a16 kimi-k2:w4a4 deepseek-v3:w4a16 qwen3-235b:w4a4 qwen3-30b:w4a16 qwen3-30b:w4a4 gpt-oss-120b:w4a16; do
  IFS=: read -r model q <<< "$spec"
  ok 380 && timeout 60 .carry/bin/fp4moe bench --model "$model" --quant "$q" --tokens 8,32,128,512 --iters 10 \
    --check --no-baseline --no-ceilings --warmup-ms 0 > "$OUT/check-$model-$q.txt" 2>&1
done
grep -ho "PASS\|FAIL" $OUT/check-*.txt | sort | uniq -c
grep -l FAIL $OUT/check-*.txt; echo "t=$(( $(date +%s) - start ))"
(cd $OUT && tar czf checks.tgz check-*.txt && rm check-*.txt)
