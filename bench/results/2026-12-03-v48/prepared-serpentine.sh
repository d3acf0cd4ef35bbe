#!/usr/bin/env bash
# Prepared in v48 (carry [".carry/serp"]: branch serpentine's CLI and test binary, sm_90a, stripped).
# The split's and the width split's launches alternate their order over the experts
# (serpentine_order; FP4MOE_SM90_SERPENTINE=0: all from expert 0 up, main's order), so that each
# launch after the first starts with the experts whose weights the one before read last (in
# L2). Predicted (v48 notes §4): up to ~2-3% at qwen3-30b / qwen3-235b T = 1024-2048, less on
# kimi-k2 / deepseek-v3 (their experts' weights are 4-15 MB: L2 holds a few).
# `bash prepared-serpentine.sh` (~540 s, timeout_s 600): the slot-search test, the wgmma and
# layer tests (8 shards, 170 s), then an A/B of the one binary with and without the switch.
# .carry/serp missing (a fresh checkout)? Build it here from branch serpentine: `git checkout
# serpentine`, `ninja -C build-carry -j2 fp4moe_cli fp4moe_tests` (sm_90a Release), then
# `strip -o` each of build-carry/fp4moe and build-carry/fp4moe_tests and `xz -T2 -6` them into
# .carry/serp/cli.xz and tests.xz.
set -u
source scripts/device_lib.sh
unxz .carry/serp/cli.xz .carry/bin/fp4moe_serp
unxz .carry/serp/tests.xz .carry/bin/fp4moe_tests
env_variant one .carry/bin/fp4moe_serp "FP4MOE_SM90_SERPENTINE=0"
# the slot search (both orders), the wgmma tests (the width split and wide width bit for bit in
# both orders), every GEMM case on the split and the layer conformance table, in 8 shards
test_shards '*FindSlot*:CudaGemmSm90.*:CudaGemmCases/*split*:Table/CudaLayerConformance.*' 150
ab_rounds ${ROUND_S:-470} ${POINT_S:-520} "one serp" \
  "qwen3-30b:w4a16:1024,2048 qwen3-235b:w4a16:1024,2048 gpt-oss-120b:w4a16:2048 kimi-k2:w4a16:2048,4096 deepseek-v3:w4a16:2048 qwen3-30b:w4a16:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report one | tee $OUT/ab-report.txt
