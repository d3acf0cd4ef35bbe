#!/usr/bin/env bash
# Prepared in v74 for a later session: branch ldgsts-warp-kb (on main 3d9a31f's grouped layout).
# Each fast-path warp loads its part of one k-block of a group. Before it, every thread loaded
# its chunks of every k-block of the group, 4 KiB apart, and cp.async's 12-bit signed offset
# cost a 64-bit add per k-block after the first. SASS per inside-K trip (8 k-blocks), against
# main:
#   - the 8-token GEMM 1: 1,192 -> 1,182;
#   - the 8-token GEMM 2: 1,193 -> 1,179 (main before the grouped layout: 1,179 / 1,178);
#   - fewer at 24 / 32 tokens, and -3 to +24 a loop at 16;
#   - registers at or under main's;
#   - the 16-token GEMM 1's 8-byte spill is back (as before the grouped layout).
# Its second commit finds the decode kernels' row pair from one block index (nb is even, so
# the two rows sit side by side). No decode kernel spills now, where main spills 4 / 4 bytes in
# two of them. The loop changes:
#   - the T = 1 GEMM 1: 309 -> 305;
#   - GEMM 1 at T = 2-8: 303 -> 308.
# CPU tests only so far.
# Carries:
#   - .carry/lw: the branch's fp4moe_tests (tests.xz) and CLI (cli.xz), sm_90a, stripped, xz'd
#     with python lzma; .carry/lw/commit names the commit;
#   - .carry/cli: main's CLI (as .carry/COMMIT says).
#   PART=tests (~330 s, carry .carry/lw): the branch's whole test binary, EP apart, in 8 shards;
#     then bench --check at the fast path's points (8-, 16-, 24- and 32-token tiles, W4A4 and
#     MXFP4 among them); then memcheck and racecheck over the fast path's tile tests (90 s each).
#   PART=ab (~330 s, carry .carry/lw and .carry/cli): alternated processes main / branch after
#     2 s of replays, point by point, at the fast path's rows.
# Merge only when the tests pass and the A/B says it pays.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
case "${PART:-tests}" in
  tests)
    unxz .carry/lw/tests.xz .carry/bin/fp4moe_tests || exit 1
    unxz .carry/lw/cli.xz .carry/bin/fp4moe_lw || exit 1
    suite_shards
    check_points lw "kimi-k2:w4a16:8,32,128,512 kimi-k2:w4a4:32,512 gpt-oss-120b:w4a16:8,128,512 qwen3-30b:w4a16:32,128,512"
    sanitizers 'CudaGemmSm80Tiles/*' 90
    echo "t=$(( $(date +%s) - start ))" ;;
  ab)
    unxz .carry/lw/cli.xz .carry/bin/fp4moe_lw || exit 1
    cp .carry/cli/fp4moe .carry/bin/fp4moe_main && chmod +x .carry/bin/fp4moe_main
    specs="kimi-k2:w4a16:8,32,128,512 deepseek-v3:w4a16:8,32 qwen3-235b:w4a16:32,128 gpt-oss-120b:w4a16:32,128 qwen3-30b:w4a16:32"
    ab_rounds_by_point ${AB_START:-280} ${AB_STOP:-320} "main lw" "$specs"
    ab_report main ;;
esac
