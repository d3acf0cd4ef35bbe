#!/usr/bin/env bash
# Prepared in v53 (carry [".carry/l16t", ".carry/l16b"]: branch live16's test binary and CLI, of its
# second commit, sm_90a, stripped; timeout_s 420, ~320 s). Branch live16 (on main): the 16-token
# tiles' groups inside K take the live n8 columns (one or both) as a constant (SASS, GEMM 1
# NVFP4 bf16 A: 21.7 -> 19.9 instructions per weight word with both, 19.0 with one), and its
# second commit keeps those tiles (bf16 A) at 5 CTAs per SM (95 registers, from 106). Its test binary has main's
# tests too: the layer case FP4MOE_SM80_INSIDE_MIN_KB (v53, not yet run on a GPU) and the tile
# tests with K a whole number of k-blocks (424c064). Here: the whole test binary, EP apart, then
# `bench --check` where the 16-token tiles run (8-13 rows per active expert) and a control.
# .carry missing? `git checkout live16`, `ninja -C build-carry -j2 fp4moe_tests fp4moe_cli`
# (sm_90a Release), `strip -o`, `xz -T2 -6` into .carry/l16t/tests.xz and .carry/l16b/cli.xz.
set -u
source scripts/device_lib.sh
unxz .carry/l16t/tests.xz .carry/bin/fp4moe_tests
suite_shards
unxz .carry/l16b/cli.xz .carry/bin/fp4moe
for spec in kimi-k2:w4a16:32,384,512 kimi-k2:w4a4:512 deepseek-v3:w4a16:256,384 qwen3-235b:w4a16:128,192 \
    qwen3-235b:w4a4:128 qwen3-30b:w4a16:128,192 qwen3-30b:w4a4:128 gpt-oss-120b:w4a16:256,384; do
  IFS=: read -r model q toks <<< "$spec"
  ok 390 && timeout 60 .carry/bin/fp4moe bench --model "$model" --quant "$q" --tokens "$toks" --iters 10 \
    --check --no-baseline --no-ceilings --warmup-ms 0 > "$OUT/check-$model-$q.txt" 2>&1
done
grep -ho "PASS\|FAIL" $OUT/check-*.txt | sort | uniq -c
grep -l FAIL $OUT/check-*.txt; echo "t=$(( $(date +%s) - start ))"
(cd $OUT && tar czf checks.tgz check-*.txt && rm check-*.txt)
