#!/usr/bin/env bash
# Prepared in v63 for the next session: branch tmab (63348c4, on main 0dd3be1): GEMM 2's rsws
# launches (rsws at 64 and 128 tokens, its wide widths, rsws4 and its narrow widths) bring B
# (h's rows, contiguous per tile) by TMA, one box of 64 k x the tile's rows a k-block, instead
# of 128 producer threads' cp.async: producer warp 0 walks the ring, thread 0 issues; the
# consumers' k loops unchanged. Off unless FP4MOE_SM90_TMAB=1. What it tests: whether the
# producers' B work costs the wgmma kernels (v63 §1, §3). Written after v63's device time was
# spent: CPU tests only. Build here first:
#   git worktree add -f /tmp/wt-tmab tmab && cmake -S /tmp/wt-tmab -B /tmp/wt-tmab/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && ninja -C /tmp/wt-tmab/build fp4moe fp4moe_tests
#   mkdir -p .carry/tb && w=/tmp/wt-tmab/build && strip -o /tmp/t $w/fp4moe_tests && \
#     xz -T2 -6 -c /tmp/t > .carry/tb/tests.xz && strip -o /tmp/c $w/fp4moe && xz -T2 -6 -c /tmp/c > .carry/tb/cli.xz
# One call, carry [".carry/tb"]: its tests (CudaGemmSm90Forced *_tmab_3ctas on every prefill
# spec: packed and batched rows, partial tiles, MX, W4A4's staged h; rsws at the spec's token
# tile, rsws4 with its width split, the split's every launch, each GEMM 2 kernel launch
# counted), memcheck and racecheck over most of them, then an A/B of main (TMAB=0) and tmab at
# four T = 512-2048 points, where rsws4 runs and its one producer warpgroup feeds four consumer
# warpgroups (next-bshare2.sh's call 2 times tmab at T >= 8192). ~550 s. Merge only after the
# whole suite passed on it.
set -u
source scripts/device_lib.sh
unxz .carry/tb/tests.xz .carry/bin/fp4moe_tests
filter_tests '*tmab*' tmab-tests
# The sanitizers over the large, narrow and split specs but the swiglu ones (45 tests, ~80 s a
# tool at v63's rate): every launch kind, packed and batched rows, MX, W4A4.
sanitizers '*large*tmab*:*split_partial*tmab*:*narrow*tmab*-*swiglu*' 150
unxz .carry/tb/cli.xz .carry/bin/fp4moe_bin_tb
env_variant main .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=0"
env_variant tmab .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=1"
ab_rounds_by_point 480 540 "main tmab" \
  "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 qwen3-30b:w4a16:2048 deepseek-v3:w4a4:2048"
ab_report main
