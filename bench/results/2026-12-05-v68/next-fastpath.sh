#!/usr/bin/env bash
# Prepared in v68 (no device was lent to it) for the next session: the two fast-path branches,
# both rebased on main 5f25b69 and carried as .carry/mu and .carry/g2e (each its fp4moe_tests and
# fp4moe, sm_90a, stripped, xz; rebuilt by `ninja -C /tmp/wt-X/build fp4moe_tests fp4moe`, then
# strip + `xz -T2 -6` into .carry/X/tests.xz and cli.xz; worktrees: `git worktree add /tmp/wt-mu
# multi-unit-r`, `git worktree add /tmp/wt-g2e g2early`, each configured with
# -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a):
#   mu  (multi-unit-r): the fast path's CTAs over several units in turn, FP4MOE_SM80_UNITS=u
#       (default 1: main's launch), each next unit's row tables and first loads issued before
#       the current unit's epilogue (v67 §3's lever: qwen3-30b's fast path at 57-64% of DRAM peak).
#   g2e (g2early): the fast path's GEMM 2 started per expert, FP4MOE_SM80_EARLY=1 (default off):
#       GEMM 1 counts its stores of h per expert, GEMM 2 (its programmatic dependent) waits on its
#       expert's count instead of on the whole of GEMM 1 (TRIED's lead; v67 §3: the SMs idle
#       9-12% of qwen3-30b's two launches).
# Carry [".carry/mu", ".carry/g2e"] (46 MB with the tree's 5).
#   PART=tests (~550 s, mu first): each branch's own tests with the fast path's tile tests in 8
#     shards, then memcheck / racecheck over a third of its own tests. PART=tests-mu /
#     tests-g2e: one branch's (~250 / ~300 s).
#   PART=ab (~540 s): alternated A/B processes of u1 (main's launch) / u2 / u4 (mu's CLI) and e0
#     (main's wait) / e1 (g2e's CLI) at the fast path's rows of the small presets and kimi-k2
#     T = 32; medians against u1 and against e0.
#   PART=suite BRANCH=mu|g2e SWITCH=VAR=value (~330 s): the whole test binary, EP apart, with the
#     switch set for every test (the tests' EnvVar restores it after those that set it), then
#     bench --check at the A/B's points with it.
# Merge a branch (its default set from the A/B) only when its tests, the suite with its switch
# and bench --check pass and the A/B says it pays; then main's suite on the GPU once more.
set -u
source scripts/device_lib.sh
specs="qwen3-30b:w4a16:32,128 qwen3-30b:w4a4:128 gpt-oss-120b:w4a16:32,128 qwen3-235b:w4a16:32 kimi-k2:w4a16:32"
# branch_tests NAME OWN_FILTER SANITIZE_FILTER SHARD_S SANITIZE_S
branch_tests() {
  unxz ".carry/$1/tests.xz" .carry/bin/fp4moe_tests || return 1
  mkdir -p "$OUT/$1"
  echo "== $1: its tests and the fast path's tile tests, 8 shards"
  (OUT=$OUT/$1 && test_shards "$2:CudaGemmSm80Tiles/*" "$4")
  if grep -q "rc=0" "$OUT/$1/suite-summary.txt" && ! grep -qE "rc=[1-9]|FAILED" "$OUT/$1/suite-summary.txt"; then
    echo "== $1: sanitizers"
    (OUT=$OUT/$1 && sanitizers "$3" "$5")
  else
    echo "$1: its tests did not all pass: no sanitizers"
  fi
}
case "${PART:-tests}" in
  tests | tests-mu | tests-g2e)
    [ "${PART:-tests}" != tests-g2e ] &&
      branch_tests mu '*Sm80Units*' '*Sm80Units*tile16_units3:*Sm80Units*tile8_units64' 150 90
    [ "${PART:-tests}" != tests-mu ] &&
      branch_tests g2e 'CudaGemmSm80Early*:CudaLayer.FastPathGemm2StartsPerExpert' 'CudaGemmSm80Early*tile8:CudaGemmSm80Early*tile32' 180 90
    (cd "$OUT" && tar czf tests.tgz mu g2e 2>/dev/null && rm -rf mu g2e)
    echo "t=$(( $(date +%s) - start ))" ;;
  ab)
    unxz .carry/mu/cli.xz .carry/bin/fp4moe_bin_mu || exit 1
    unxz .carry/g2e/cli.xz .carry/bin/fp4moe_bin_g2e || exit 1
    for u in 1 2 4; do env_variant u$u .carry/bin/fp4moe_bin_mu "FP4MOE_SM80_UNITS=$u"; done
    for e in 0 1; do env_variant e$e .carry/bin/fp4moe_bin_g2e "FP4MOE_SM80_EARLY=$e"; done
    ab_rounds_by_point 480 540 "u1 u2 u4 e0 e1" "$specs"
    python3 scripts/ab_summary.py "$OUT/ab" --base e0
    ab_report u1 ;;
  suite)
    unxz ".carry/$BRANCH/tests.xz" .carry/bin/fp4moe_tests || exit 1
    unxz ".carry/$BRANCH/cli.xz" .carry/bin/fp4moe_bin_b || exit 1
    export "${SWITCH:?SWITCH=VAR=value}"
    suite_shards
    env_variant on .carry/bin/fp4moe_bin_b "$SWITCH"
    check_points on "$specs" ;;
esac
