#!/usr/bin/env bash
# Prepared in v57 for the next session (branch hoist, §3 of the v57 notes). Carry .carry/ht57:
# tests.xz and cli.xz, hoist's test binary and CLI (sm_90a, stripped, xz), built by
#   git checkout hoist && ninja -C build-carry fp4moe_tests fp4moe
# The whole test binary, EP apart; memcheck and racecheck over the forced rsws / rsws4 cases of
# one k-block and odd KB, and over the MX ones; bench --check at points of each rsws kernel.
set -u
source scripts/device_lib.sh
unxz .carry/ht57/tests.xz .carry/bin/fp4moe_tests
unxz .carry/ht57/cli.xz .carry/bin/fp4moe_hoist
suite_shards
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 .carry/bin/fp4moe_tests \
    --gtest_filter='Cases/CudaGemmSm90Forced.MatchesHost/*one_kblock*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*large_nvfp4_odd*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*mx*rsws*' \
    > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool.txt" | tr '\n' ' ')"
done
mkdir -p "$OUT/check"
for m in deepseek-v3:w4a16:2048 kimi-k2:w4a4:1024 qwen3-235b:w4a16:8192 gpt-oss-120b:w4a16:512 gpt-oss-120b:w4a16:8192; do
  IFS=: read -r model q toks <<< "$m"
  .carry/bin/fp4moe_hoist bench --model $model --quant $q --tokens $toks --check > "$OUT/check/$model-$q-$toks.txt" 2>&1
  echo "check $m rc=$? $(grep -c PASS "$OUT/check/$model-$q-$toks.txt") PASS lines"
done
(cd "$OUT" && tar czf check.tgz check && rm -rf check)
echo "t=$(( $(date +%s) - start ))"
