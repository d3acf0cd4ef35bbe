#!/usr/bin/env bash
# Prepared in v63 for the next session: branch bshare2 (a4bf13d, on bshare): rsws's 128-token
# tiles with B shared by clusters of two CTAs, the stage-free handshake between the pair made by
# the producers (pfree barriers) instead of the consumers, so that the consumers' k loop is
# rsws's (329 instructions per two k-blocks; bshare's 345 lost 1.1-3.0%, v63 §1). Off unless
# FP4MOE_SM90_BSHARE=1. Written after v63's device time was spent: CPU tests only. Two calls,
# each within 30 s of the last. Build here first (a fresh checkout has no .carry):
#   git worktree add -f /tmp/wt-bshare bshare2 && cmake -S /tmp/wt-bshare -B /tmp/wt-bshare/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && ninja -C /tmp/wt-bshare/build fp4moe fp4moe_tests
#   mkdir -p .carry/bs2 && w=/tmp/wt-bshare/build && strip -o /tmp/t $w/fp4moe_tests && \
#     xz -T2 -6 -c /tmp/t > .carry/bs2/tests.xz && strip -o /tmp/c $w/fp4moe && xz -T2 -6 -c /tmp/c > .carry/bs2/cli.xz
#   and the probe's CLI: branch bshare2-solo (1ac0580) built likewise, its fp4moe ->
#   .carry/bso/cli.xz; branch tmab's CLI as next-tmab.sh says, -> .carry/tb/cli.xz.
# Call 1, carry [".carry/bs2"]: PART=tests — the shared-B tests, memcheck / racecheck over them
#   (the pfree handshake, remote arrivals and pushes), then the whole binary (EP apart). ~500 s.
# Call 2, carry [".carry/bs2/cli.xz", ".carry/bso/cli.xz", ".carry/tb/cli.xz"]: PART=ab — main
#   (BSHARE=0) against bshare2 (BSHARE=1), the probe solo (bshare2-solo's CLI, BSHARE=2: the
#   shared launch with no pushes and no handshake, each CTA's other half of B zero: what halving
#   the B loads gives with no coupling, an upper bound of B sharing at these tiles; its --check
#   in round 1 FAILs by design) and, where its CLI is carried, tmab (FP4MOE_SM90_TMAB=1, GEMM
#   2's B by TMA) at four 128-token-tile points; then ncu of the four at kimi-k2 T = 16384 (L2
#   and L2-to-SM bytes, tensor pipe; here, scripts/ncu_breakdown.py on each csv prints the GB
#   each kernel moved). ~450 s.
# Reading it: solo no faster than main closes B sharing at 128-token tiles (and the 256-token
#   tile with it); solo faster but bshare2 not puts the cost in the pair's coupling. ncu's
#   launch__grid_size says whether the cluster launch keeps every SM (66 pairs of 132): fewer
#   resident pairs (cudaOccupancyMaxActiveClusters) would cost bshare and solo alike.
# The binaries are unpacked under names no variant takes: env_variant NAME writes
# .carry/bin/fp4moe_NAME, and v63's call 2 lost its A/B to a variant named as its binary.
set -u
source scripts/device_lib.sh
if [ "${PART:-tests}" = tests ]; then
  unxz .carry/bs2/tests.xz .carry/bin/fp4moe_tests
  filter_tests '*shared*:*large_nvfp4_pairs*' shared-tests
  sanitizers '*shared*' 120
  suite_shards
else
  unxz .carry/bs2/cli.xz .carry/bin/fp4moe_bin_bs2
  env_variant main .carry/bin/fp4moe_bin_bs2 "FP4MOE_SM90_BSHARE=0"
  env_variant bs2 .carry/bin/fp4moe_bin_bs2 "FP4MOE_SM90_BSHARE=1"
  unxz .carry/bso/cli.xz .carry/bin/fp4moe_bin_bso
  env_variant solo .carry/bin/fp4moe_bin_bso "FP4MOE_SM90_BSHARE=2"
  variants="main bs2 solo"
  if [ -f .carry/tb/cli.xz ]; then  # branch tmab (next-tmab.sh): GEMM 2's B by TMA
    unxz .carry/tb/cli.xz .carry/bin/fp4moe_bin_tb
    env_variant tmab .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=1"
    variants="main bs2 solo tmab"
  fi
  ab_rounds_by_point 200 400 "$variants" \
    "kimi-k2:w4a16:16384 qwen3-235b:w4a16:16384 qwen3-30b:w4a16:8192 deepseek-v3:w4a4:8192"
  ab_report main
  mkdir -p "$OUT/ncu"
  for v in 0 1 2 3; do
    ok 540 || break
    bin=.carry/bin/fp4moe_bin_bs2
    [ $v = 2 ] && bin=.carry/bin/fp4moe_bin_bso
    [ $v = 3 ] && { [ -x .carry/bin/fp4moe_bin_tb ] || break; bin=.carry/bin/fp4moe_bin_tb; }
    FP4MOE_SM90_TMAB=$([ $v = 3 ] && echo 1 || echo 0) FP4MOE_SM90_BSHARE=$([ $v = 3 ] && echo 0 || echo $v) timeout 60 ncu --clock-control none -k regex:sm90_rsws --launch-count 4 \
      --metrics gpu__time_duration.sum,launch__grid_size,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,dram__bytes_read.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      --csv --print-units base $bin bench --model kimi-k2 --tokens 16384 --iters 1 --copies 1 \
      --warmup-ms 0 --no-check --no-ceilings --no-baseline > "$OUT/ncu/bshare2-$v.csv" 2> "$OUT/ncu/bshare2-$v.err"
    echo "ncu BSHARE=$v rc=$?"
    grep -h '^"' "$OUT/ncu/bshare2-$v.csv" | awk -F'","' 'NR>1{print $1, substr($5,1,50), $(NF-2), $NF}' | tr -d '"'
  done
  (cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
fi
