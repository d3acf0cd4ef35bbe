#!/usr/bin/env bash
# Prepared in v62 for the next session: branch bshare (rsws's 128-token tiles with B shared by
# clusters of two CTAs, kShare in gemm_sm90_kernel.cuh; off unless FP4MOE_SM90_BSHARE=1 or a
# test's set_sm90_shared_b) — written after v62's device time was spent: CPU tests only. Two
# calls, each within 30 s of the last. Build here first (a fresh checkout has no .carry):
#   git worktree add -f /tmp/wt-bshare bshare && cmake -S /tmp/wt-bshare -B /tmp/wt-bshare/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && ninja -C /tmp/wt-bshare/build fp4moe fp4moe_tests
#   mkdir -p .carry/bs && w=/tmp/wt-bshare/build && strip -o /tmp/t $w/fp4moe_tests && \
#     xz -T2 -6 -c /tmp/t > .carry/bs/tests.xz && strip -o /tmp/c $w/fp4moe && xz -T2 -6 -c /tmp/c > .carry/bs/cli.xz
# Call 1, carry [".carry/bs"]: PART=tests — the shared-B tests first (CudaGemmSm90Forced *_shared*,
#   the new spec large_nvfp4_pairs everywhere), memcheck / racecheck over them (the cluster
#   barriers, remote arrivals and pushes), then the whole binary (EP apart). ~330 s.
# Call 2, same carry: PART=ab — one binary, the variants by environment (bs: FP4MOE_SM90_BSHARE=1):
#   A/B at four 128-token-tile points, --check in round 1, then ncu of both variants' L2 bytes
#   at kimi-k2 T = 16384 (v62 call 4's metrics: main moved 4.4 TB/s L2-to-SM in GEMM 1). ~420 s.
# If it wins: a rule for where (row tiles even, NVFP4; MX needs its instantiation), tests of the
# default, then the 256-token tile (notes v62 §3).
set -u
source scripts/device_lib.sh
unxz .carry/bs/tests.xz .carry/bin/fp4moe_tests
unxz .carry/bs/cli.xz .carry/bin/fp4moe_bs
if [ "${PART:-tests}" = tests ]; then
  .carry/bin/fp4moe_tests --gtest_filter='*shared*:*large_nvfp4_pairs*' > "$OUT/shared-tests.txt" 2>&1
  echo "shared tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/shared-tests.txt" | tr '\n' ' ')"
  grep -E '^\[  FAILED' "$OUT/shared-tests.txt" | head -20
  sanitizers '*shared*' 120
  suite_shards
else
  env_variant main .carry/bin/fp4moe_bs "FP4MOE_SM90_BSHARE=0"
  env_variant bs .carry/bin/fp4moe_bs "FP4MOE_SM90_BSHARE=1"
  ab_rounds_by_point 250 330 "main bs" \
    "kimi-k2:w4a16:16384 qwen3-235b:w4a16:16384 qwen3-30b:w4a16:8192 deepseek-v3:w4a16:8192"
  echo "rounds $ab_round t=$(( $(date +%s) - start ))"
  ab_report main
  mkdir -p "$OUT/ncu"
  for v in 0 1; do
    ok 500 || break
    FP4MOE_SM90_BSHARE=$v timeout 60 ncu --clock-control none -k regex:sm90_rsws --launch-count 4 \
      --metrics gpu__time_duration.sum,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,dram__bytes_read.sum.per_second \
      --csv --print-units base .carry/bin/fp4moe_bs bench --model kimi-k2 --tokens 16384 --iters 1 --copies 1 \
      --warmup-ms 0 --no-check --no-ceilings --no-baseline > "$OUT/ncu/bshare$v.csv" 2> "$OUT/ncu/bshare$v.err"
    echo "ncu BSHARE=$v rc=$?"
    grep -h '^"' "$OUT/ncu/bshare$v.csv" | awk -F'","' 'NR>1{print $1, substr($5,1,50), $(NF-2), $NF}' | tr -d '"'
  done
  (cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
fi
