#!/usr/bin/env bash
# Prepared for the next session (~450 s with start-up): branch fast-pdl, the fast path's kernels
# (gemm_sm80_kernel.cuh) as programmatic dependents. GEMM 1 waits at its start and then triggers.
# GEMM 2 finds its slot and requests its first weights before it waits for GEMM 1; the combine
# after it is launched as its dependent. On main the fast path launches normally and never
# triggers, so a GEMM 2 after it (fast or decode) starts only once it completes, and the
# combine after a fast GEMM 2 launches normally. FP4MOE_SM80_PDL=0 is main's behaviour.
#   bash bench/results/2026-12-02-v43/prepared-fast-pdl.sh
# Carry .carry/z88 (the branch's sm_90a CLI and test binary).
#   1. the whole test binary, EP apart, in 8 shards (the conformance cases compare the default
#      launch bit for bit against FP4MOE_SM80_PDL=0);
#   2. A/B FP4MOE_SM80_PDL=0 ("main") against the branch ("pdl") where the fast path runs one or
#      both GEMMs: T = 8-128 on the E = 128 presets (qwen3-30b T = 8: decode GEMM 1, fast GEMM 2),
#      kimi-k2 T = 8 / 32 / 512.
set -u
source scripts/device_lib.sh
unxz .carry/z88/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z88/cli.xz .carry/bin/fp4moe_pdl
env_variant main .carry/bin/fp4moe_pdl "FP4MOE_SM80_PDL=0"
env_variant pdl .carry/bin/fp4moe_pdl ""
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 timeout 220 bash scripts/gpu_suite.sh tests 2>&1 |
  grep -E "^== |FAILED" | tee $OUT/suite-summary.txt
(cd $OUT && tar czf suite.tgz suite && rm -rf suite)
echo "suite t=$(( $(date +%s) - start ))"
ab_rounds 400 430 "main pdl" "qwen3-30b:w4a16:8,16,32,64,128 qwen3-235b:w4a16:8,16,32,128 gpt-oss-120b:w4a16:16,32,128 qwen3-30b:w4a4:32,128" "kimi-k2:w4a16:8,32,512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
