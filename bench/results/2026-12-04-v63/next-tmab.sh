#!/usr/bin/env bash
# Prepared in v63 for the next session: branch tmab (51171c8, on main 0dd3be1): GEMM 2's rsws
# launches at 128-token tiles bring B (h's rows, contiguous per expert) by TMA, one box of 64 k
# x 128 rows a k-block, instead of 128 producer threads' cp.async (8 chunks each a k-block):
# producer warp 0 walks the ring, thread 0 issues; the consumers' k loop unchanged (329). Off
# unless FP4MOE_SM90_TMAB=1. What it tests: whether the producers' B work costs the 128-token
# kernels (v63 §1: bshare halved it with no gain to show, but its consumers grew). Written
# after v63's device time was spent: CPU tests only. Build here first:
#   git worktree add -f /tmp/wt-tmab tmab && cmake -S /tmp/wt-tmab -B /tmp/wt-tmab/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && ninja -C /tmp/wt-tmab/build fp4moe fp4moe_tests
#   mkdir -p .carry/tb && w=/tmp/wt-tmab/build && strip -o /tmp/t $w/fp4moe_tests && \
#     xz -T2 -6 -c /tmp/t > .carry/tb/tests.xz && strip -o /tmp/c $w/fp4moe && xz -T2 -6 -c /tmp/c > .carry/tb/cli.xz
# One call, carry [".carry/tb/tests.xz"]: its tests (CudaGemmSm90Forced *_tmab_3ctas on every
# prefill spec: packed and batched rows, partial tiles, MX, W4A4's staged h), memcheck and
# racecheck over them, and the sm90 GEMM suites. ~300 s. Its A/B runs in next-bshare2.sh's call
# 2 (variant tmab, where .carry/tb/cli.xz is carried). Merge only after the whole suite passed.
set -u
source scripts/device_lib.sh
unxz .carry/tb/tests.xz .carry/bin/fp4moe_tests
filter_tests '*tmab*' tmab-tests
sanitizers '*tmab*' 150
test_shards '*Sm90*' 200
