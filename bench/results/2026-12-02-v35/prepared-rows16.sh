#!/usr/bin/env bash
# Prepared in v35 (carry [".carry/z55"]: main 860ee3c's CLI, sm_90a; ~400 s). NVFP4 at 16-18
# rows per expert after the fold: v34 measured the fast path there against the unfolded wgmma
# (qwen3-30b / qwen3-235b T = 256 -6.3 / -1.9%, deepseek-v3 T = 512 +1.5%, kimi-k2 T = 768
# +2.8%; from 18 rows the fast path lost); v35's fold took back 1.9 / 0.5% of that. Default
# against the fast path at 16-18 rows (FP4MOE_SM90_MIN_ROWS=19), alternated. If the fast path
# still wins on the qwen3 presets and loses on the large ones, a threshold by the GEMM's
# weights per expert (N x K) follows, with the per-GEMM split v35 §2 saw in the node times.
set -u
source scripts/device_lib.sh
unxz .carry/z55/cli.xz .carry/bin/fp4moe_def
env_variant fast .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=19"
ab_rounds 370 400 "def fast" "qwen3-30b:w4a16:256,272,288 qwen3-30b:w4a4:256 qwen3-235b:w4a16:256,272 qwen3-235b:w4a4:256 deepseek-v3:w4a16:512 kimi-k2:w4a16:768"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report def
