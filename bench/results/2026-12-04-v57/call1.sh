#!/usr/bin/env bash
# v57 call 1 (carry .carry/kp3: branch kpair's final form (7b0b1fe), test binary and CLI, sm_90a,
# stripped, xz): the whole test binary, EP apart, in 8 shards; memcheck and racecheck over the
# wgmma kernels' one-k-block and odd-KB cases; bench --check on the branch's CLI at four points.
set -u
source scripts/device_lib.sh
unxz .carry/kp3/tests.xz .carry/bin/fp4moe_tests
unxz .carry/kp3/cli.xz .carry/bin/fp4moe_kpair
suite_shards
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 .carry/bin/fp4moe_tests \
    --gtest_filter='Cases/CudaGemmSm90Forced.MatchesHost/*one_kblock*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*large_nvfp4_odd*rsws*' \
    > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool.txt" | tr '\n' ' ')"
done
mkdir -p "$OUT/check"
for m in deepseek-v3:w4a16:2048 kimi-k2:w4a4:1024 qwen3-235b:w4a16:8192 gpt-oss-120b:w4a16:512; do
  IFS=: read -r model q toks <<< "$m"
  .carry/bin/fp4moe_kpair bench --model $model --quant $q --tokens $toks --check > "$OUT/check/$model-$q-$toks.txt" 2>&1
  echo "check $m rc=$? $(grep -ciE 'pass' "$OUT/check/$model-$q-$toks.txt") pass lines"
done
(cd "$OUT" && tar czf check.tgz check && rm -rf check)
echo "t=$(( $(date +%s) - start ))"
