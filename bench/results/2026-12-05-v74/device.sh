#!/usr/bin/env bash
# v74: branch grouped-layout (the fragment layout's rows in groups of 8, a group's k-block 4 KiB
# in a row: gemm_internal.hpp frag_block) on the H200. Carries: .carry/gl: tests.xz (the
# branch's fp4moe_tests) and fp4moe-grouped.xz (its CLI); .carry/glab: fp4moe-main.xz (main
# b2ee040's CLI); .carry/glwhl: the branch's cp312 sm_90a wheel. All sm_90a, stripped, xz'd
# (python lzma).
#   PART=suite (~400 s; carry .carry/gl): the layout tests; the whole test binary, EP apart, in
#     8 shards; bench --check of the branch at a point of every kernel family (decode T = 1-3,
#     the fast path, rsws4 / split, rsws 128-token), gpt-oss-120b among them (GEMM 2: 180
#     fragment rows, a last group of 4).
#   PART=ab (~330 s; carry .carry/gl, .carry/glab): alternated processes main / grouped after 2 s
#     of replays, point by point.
#   PART=extra (~250 s; carry .carry/gl, .carry/glwhl): memcheck and racecheck over the forced
#     rsws / rsws4 cases and the fast path's tile tests; pytest from the wheel.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
case "${PART:-suite}" in
  suite)
    unxz .carry/gl/tests.xz .carry/bin/fp4moe_tests || exit 1
    unxz .carry/gl/fp4moe-grouped.xz .carry/bin/fp4moe_grouped || exit 1
    filter_tests 'CudaGemmLayout.*' layout 60
    suite_shards
    check_points grouped "kimi-k2:w4a16:1,3,8,32,128 gpt-oss-120b:w4a16:1,32,512,2048,8192 qwen3-30b:w4a4:1,128,2048 deepseek-v3:w4a16:2048,16384"
    echo "t=$(( $(date +%s) - start ))" ;;
  extra)
    unxz .carry/gl/tests.xz .carry/bin/fp4moe_tests || exit 1
    sanitizers "Cases/CudaGemmSm90Forced.MatchesHost/*one_kblock*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*mx*rsws4*:CudaGemmSm80Tiles/*" 75
    pytest_wheel .carry/glwhl/*.whl 150
    echo "t=$(( $(date +%s) - start ))" ;;
  ab)
    unxz .carry/gl/fp4moe-grouped.xz .carry/bin/fp4moe_grouped || exit 1
    unxz .carry/glab/fp4moe-main.xz .carry/bin/fp4moe_main || exit 1
    specs="kimi-k2:w4a16:1,8,32,128 deepseek-v3:w4a16:8,32 qwen3-235b:w4a16:32,2048 gpt-oss-120b:w4a16:1,32 kimi-k2:w4a4:32,8192"
    ab_rounds_by_point ${AB_START:-280} ${AB_STOP:-320} "main grouped" "$specs"
    ab_report main ;;
esac
