#!/usr/bin/env bash
# Prepared for the next session's first call (~520 s with start-up): main after v42 (the slot
# search in one load per 256 experts, merged without a whole-suite GPU run).
#   bash bench/results/2026-12-02-v42/prepared-next.sh <carrydir>
# Carry .carry/<carrydir>/{cli,tests}.xz (main's sm_90a binaries: scripts/build_gpu_carry.sh or
# build-carry, stripped and xz'd) and .carry/z78/cli.xz (main d2f1719's CLI, before the change).
#   1. main's whole test binary, EP apart, in 8 shards (with CudaGemmLayout.FindSlotMatchesTheWalkOverExperts);
#   2. A/B d2f1719 ("old") against main: kimi-k2 (E = 384) and deepseek-v3 (E = 256) at T = 1-8,
#      where the search should gain most, and the two T = 8 points that read 0.2-0.5% slower.
set -u
source scripts/device_lib.sh
unxz .carry/$1/tests.xz .carry/bin/fp4moe_tests
unxz .carry/$1/cli.xz .carry/bin/fp4moe_main
unxz .carry/z78/cli.xz .carry/bin/fp4moe_old
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 |
  grep -E "^== |FAILED" | tee $OUT/suite-summary.txt
(cd $OUT && tar czf suite.tgz suite && rm -rf suite)
echo "suite t=$(( $(date +%s) - start ))"
ab_rounds 470 500 "old main" "kimi-k2:w4a16:1,2,4,8 deepseek-v3:w4a16:1,4 qwen3-30b:w4a16:8 qwen3-235b:w4a16:8"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report old | tee $OUT/ab-report.txt
