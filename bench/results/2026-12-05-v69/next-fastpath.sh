#!/usr/bin/env bash
# Prepared in v69 (no device was lent to it) for the next session; supersedes v68's
# next-fastpath.sh. One carried build, .carry/mue (branch mu-early: multi-unit-r and g2early
# merged, both rebased on main 3851887, with their combination), in place of v68's two: one test
# run and one binary for every variant of the A/B. Its switches, each read per call:
#   FP4MOE_SM80_UNITS=u   (default 1: main's launch) the fast path's CTAs over u slots in turn,
#                         each next slot's row tables and first loads issued before the current
#                         slot's epilogue (v67 §3: qwen3-30b's fast path at 57-64% of DRAM peak);
#   FP4MOE_SM80_EARLY=1   (default 0: main's wait) GEMM 1 counts its stores of h per expert and
#                         GEMM 2, its programmatic dependent, waits on its expert's count instead
#                         of on the whole of GEMM 1 (v67 §3: the SMs idle 9-12% of qwen3-30b's two
#                         launches); with u > 1, each next slot waits for its own expert.
# The carry: fp4moe_tests and fp4moe of mu-early (sm_90a, Release), stripped, `xz -T2 -6` into
# .carry/mue/tests.xz and cli.xz (23 MB; `git worktree add /tmp/wt-combo mu-early`, configure with
# -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a, `ninja fp4moe_tests fp4moe`); since v70 also
# main's CLI (build-carry, scripts/build_gpu_carry.sh) as main-cli.xz (34 MB in all, with the
# tracked tree's 25 under the 64 MiB a call carries; main's fp4moe_tests travel apart, in
# .carry/main70/tests.xz, for PART=mainsuite). v70's review
# found four of the branch's GEMM 1 kernels at more registers than main's with both switches off
# (5 -> 4 or 4 -> 3 CTAs an SM), so its u1e0 is not main's speed: the A/B's base is main's CLI.
# .carry/mue/commit names the two commits.
#   PART=tests (~400 s): the branch's own tests (CudaGemmSm80Units, CudaGemmSm80Early at 1 and 3
#     slots a CTA, CudaLayer.FastPathGemm2StartsPerExpert) and the fast path's tile tests in 8
#     shards; then memcheck and racecheck over a few of its own.
#   PART=ab (~540 s; AB_START / AB_STOP: the seconds after which no round / no point starts, 480 / 540): alternated A/B processes of main (main's CLI) / u1e0 (the branch, both switches
#     off) / u2e0 / u1e1 / u2e1 at the fast path's rows of the small presets and kimi-k2 T = 32;
#     medians against main.
#   PART=suite SWITCH="VAR=value ..." (~330 s): the whole test binary, EP apart, with the switches
#     set for every test (the tests' EnvVar restores them after those that set them), then
#     bench --check at the A/B's points with them.
#   PART=mainsuite (~330 s; carry [".carry/main70"] instead): main's test binary, EP apart (main
#     has not run on a GPU since v67).
# Merge mu-early (its defaults set from the A/B; a switch that does not pay stays off, or its
# code is dropped) only when its tests, the suite with its switches and bench --check pass and
# the A/B says it pays against main, u1e0 included (its registers); then main's suite on the GPU
# once more.
set -u
source scripts/device_lib.sh
specs="qwen3-30b:w4a16:32,128 qwen3-30b:w4a4:128 gpt-oss-120b:w4a16:32,128 qwen3-235b:w4a16:32 kimi-k2:w4a16:32"
case "${PART:-tests}" in
  tests)
    unxz .carry/mue/tests.xz .carry/bin/fp4moe_tests || exit 1
    echo "== mu-early: its tests and the fast path's tile tests, 8 shards"
    test_shards '*Sm80Units*:CudaGemmSm80Early*:CudaLayer.FastPathGemm2StartsPerExpert:CudaGemmSm80Tiles/*' 200
    if grep -q "rc=0" "$OUT/suite-summary.txt" && ! grep -qE "rc=[1-9]|FAILED" "$OUT/suite-summary.txt"; then
      echo "== mu-early: sanitizers"
      sanitizers '*Sm80Units*tile16_units3:*Sm80Units*tile8_units64:CudaGemmSm80Early*tile8_units3:CudaGemmSm80Early*tile32_units1' 100
    else
      echo "its tests did not all pass: no sanitizers"
    fi
    echo "t=$(( $(date +%s) - start ))" ;;
  ab)
    unxz .carry/mue/cli.xz .carry/bin/fp4moe_bin_mue || exit 1
    unxz .carry/mue/main-cli.xz .carry/bin/fp4moe_bin_main || exit 1
    env_variant main .carry/bin/fp4moe_bin_main ""
    for v in u1e0 u2e0 u1e1 u2e1; do
      env_variant $v .carry/bin/fp4moe_bin_mue "FP4MOE_SM80_UNITS=${v:1:1} FP4MOE_SM80_EARLY=${v:3:1}"
    done
    ab_rounds_by_point ${AB_START:-480} ${AB_STOP:-540} "main u1e0 u2e0 u1e1 u2e1" "$specs"
    ab_report main ;;
  suite)
    unxz .carry/mue/tests.xz .carry/bin/fp4moe_tests || exit 1
    unxz .carry/mue/cli.xz .carry/bin/fp4moe_bin_mue || exit 1
    for kv in ${SWITCH:?SWITCH=\"VAR=value ...\"}; do export "$kv"; done
    suite_shards
    env_variant on .carry/bin/fp4moe_bin_mue "$SWITCH"
    check_points on "$specs" ;;
  mainsuite)
    unxz .carry/main70/tests.xz .carry/bin/fp4moe_tests || exit 1
    suite_shards ;;
esac
