#!/usr/bin/env bash
# Prepared in v59 for the next session (branch ring, notes v59 §4). Carry .carry/rg60: tests.xz and
# cli.xz, ring's test binary and CLI (sm_90a, stripped, xz), built by
#   git checkout ring && ninja -C build-carry fp4moe_tests fp4moe
# The suite (EP apart: it runs CudaGemmSm90.WidthSplitAtEveryWidth, every narrow width bit for
# bit against width 8, and WideWidthAtEveryWidth), the sanitizers over the rsws cases, the forced
# rsws4 narrow_* cases and the forced splits of split_partial_* (the kernels
# whose ring changed), bench --check at the narrow widths' points. ~400 s.
set -u
source scripts/device_lib.sh
unxz .carry/rg60/tests.xz .carry/bin/fp4moe_tests
unxz .carry/rg60/cli.xz .carry/bin/fp4moe_ring
suite_shards
sanitizers "$rsws_sanitize_cases:Cases/CudaGemmSm90Forced.MatchesHost/narrow_*rsws4*:Cases/CudaGemmSm90Forced.MatchesHost/split_partial*split_3ctas" 260
check_points ring "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 qwen3-235b:w4a16:2048 deepseek-v3:w4a16:2048 qwen3-30b:w4a16:512 kimi-k2:w4a4:1024"
echo "t=$(( $(date +%s) - start ))"
