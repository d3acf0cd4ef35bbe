#!/usr/bin/env bash
# Prepared in v64 for the next session: branch tmab (be88d69, rebased on main 6ab1940; ea2f92a on
# 3c9e6ec since v65): GEMM 2's
# rsws launches (rsws at 64 and 128 tokens, its wide widths, rsws4 and its narrow widths) bring B
# (h's rows, contiguous per tile) by one TMA box of 64 k x the tile's rows a k-block instead of
# 128 producer threads' cp.async; producer warp 0 walks the ring, thread 0 issues every box and
# is the full barriers' one arrival. Off unless FP4MOE_SM90_TMAB=1. v64 ran v63's build: its
# first launch hung (large_nvfp4_rsws_tmab_3ctas; every tmab bench process ran into its 60 s
# limit), because every lane of warp 0 issued B's box, 32 times the bytes expect_tx counted. The
# fix (be88d69) issues it from thread 0 alone. CPU tests only since. (v65 rebased tmab on main
# 3c9e6ec, as ea2f92a, and rebuilt .carry/tb from it: the bench's clock line under each row, which
# ab_summary.py turns into each variant's clock and change in cycles.) Build here first:
#   git worktree add -f /tmp/wt-tmab tmab && cmake -S /tmp/wt-tmab -B /tmp/wt-tmab/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && ninja -C /tmp/wt-tmab/build fp4moe fp4moe_tests
#   mkdir -p .carry/tb && w=/tmp/wt-tmab/build && strip -o /tmp/t $w/fp4moe_tests && \
#     xz -T2 -6 -c /tmp/t > .carry/tb/tests.xz && strip -o /tmp/c $w/fp4moe && xz -T2 -6 -c /tmp/c > .carry/tb/cli.xz
# Branch tmab is a near repeat of v46's gemm2-tma-b (TRIED: one box of h rows per stage from
# thread 0 in the rsws kernels, 128-token tiles and the producers' proxy fence included; no gain
# at T = 512-16384 in 4 rounds), so it runs as a guarded variant of the call that matters more:
#   PART=ab first (~500 s), carry [".carry/tb"]: the A/B at four 128-token-tile points (T >= 8192),
#     the SM clock logged (clocks_start), main against `zero`: main's kernels on inputs with every
#     other token's hidden states zero (bench --zero-tokens 0.5), the same bytes and instructions
#     with half of B zero as in v64's solo probe, which also halved B's loads: what the data alone
#     gives the clock. tmab joins as a third variant if one checked run of it finishes (its hang
#     of v64 is fixed but has not run since). Then ncu of the rsws launches at kimi-k2 T = 16384
#     for each, with the SM clock (sm__cycles_elapsed.avg.per_second: scripts/ncu_breakdown.py
#     prints each launch's cycles, so that a clock difference under the power cap does not read
#     as work; v64 §2). Reading zero: as fast as solo (-10 to -12%) puts solo's clock in the data,
#     and the bytes moved are no energy lever; no faster than main puts it in the bytes.
#   PART=tests (~560 s), only if tmab gained: the *tmab* tests (stops if they fail or hang:
#     filter_tests names the test), memcheck / racecheck over 45 of them, then the A/B main /
#     tmab at four T = 512-2048 points until 540 s.
#   PART=suite (~300 s), likewise: the whole test binary, EP apart (main's tests as of 6ab1940).
# Merge only after the whole suite passed on it and the A/B says it pays.
set -u
source scripts/device_lib.sh
part=${PART:-ab}
if [ "$part" = tests ]; then
  unxz .carry/tb/tests.xz .carry/bin/fp4moe_tests
  filter_tests '*tmab*' tmab-tests 240
  if ! grep -q '^\[  PASSED  \]' "$OUT/tmab-tests.txt" || grep -q '^\[  FAILED  \]' "$OUT/tmab-tests.txt"; then
    echo "tmab tests did not pass: no sanitizers, no A/B"; exit 1
  fi
  # The large, narrow and split specs but the swiglu ones: every launch kind, packed and batched
  # rows, MX, W4A4.
  sanitizers '*large*tmab*:*split_partial*tmab*:*narrow*tmab*-*swiglu*' 150
  unxz .carry/tb/cli.xz .carry/bin/fp4moe_bin_tb
  env_variant main .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=0"
  env_variant tmab .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=1"
  ab_rounds_by_point 470 530 "main tmab" \
    "kimi-k2:w4a16:2048 qwen3-235b:w4a16:512 qwen3-30b:w4a16:2048 deepseek-v3:w4a4:2048"
  ab_report main
elif [ "$part" = ab ]; then
  unxz .carry/tb/cli.xz .carry/bin/fp4moe_bin_tb
  env_variant main .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=0"
  env_variant tmab .carry/bin/fp4moe_bin_tb "FP4MOE_SM90_TMAB=1"
  printf '#!/bin/sh\nFP4MOE_SM90_TMAB=0 exec %s "$@" --zero-tokens 0.5\n' "$PWD/.carry/bin/fp4moe_bin_tb" > .carry/bin/fp4moe_zero
  chmod +x .carry/bin/fp4moe_zero
  variants="main zero"
  timeout 40 .carry/bin/fp4moe_tmab bench --model qwen3-30b --tokens 8192 --iters 5 --warmup-ms 0 --check \
    --no-baseline --no-ceilings > "$OUT/tmab-sanity.txt" 2>&1 && grep -q PASS "$OUT/tmab-sanity.txt" &&
    variants="main zero tmab"
  echo "tmab sanity: $(grep -cE 'PASS' "$OUT/tmab-sanity.txt") PASS; variants: $variants"
  clocks_start 200
  ab_rounds_by_point 300 370 "$variants" \
    "kimi-k2:w4a16:16384 qwen3-235b:w4a16:16384 qwen3-30b:w4a16:8192 deepseek-v3:w4a4:8192"
  clocks_stop
  ab_report main
  mkdir -p "$OUT/ncu"
  for v in 0 1 2; do
    ok 450 || break
    [ $v = 1 ] && [ "$variants" = "main zero" ] && continue
    zero=(); [ $v = 2 ] && zero=(--zero-tokens 0.5)
    FP4MOE_SM90_TMAB=$((v == 1)) timeout 50 ncu --clock-control none -k regex:sm90_rsws --launch-count 4 \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
      --csv --print-units base .carry/bin/fp4moe_bin_tb bench --model kimi-k2 --tokens 16384 --iters 1 --copies 1 \
      --warmup-ms 0 --no-check --no-ceilings --no-baseline "${zero[@]}" > "$OUT/ncu/tmab-$v.csv" 2> "$OUT/ncu/tmab-$v.err"
    echo "ncu variant $v (0 main, 1 tmab, 2 zero) rc=$?"
    python3 scripts/ncu_breakdown.py "$OUT/ncu/tmab-$v.csv" | head -6
  done
  (cd "$OUT" && tar czf ncu.tgz ncu clocks.csv && rm -rf ncu)
else
  unxz .carry/tb/tests.xz .carry/bin/fp4moe_tests
  suite_shards
fi
