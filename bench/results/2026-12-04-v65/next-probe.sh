#!/usr/bin/env bash
# Prepared in v65 (no device that session) for a later one: what GEMM 1's activation math and the
# weight decode of the 128-token rsws kernels cost under the 700 W cap, with the SM clock.
# v26 measured these bounds (no epilogue: kimi-k2 / qwen3-235b T = 16384 -8.9 / -17.8%; no decode
# -8.7 / -7.7%) in the short timing, before the sustained timing existed (v51) and before v64 found
# that under the cap two variants can differ by clock alone (solo: the same cycles, ~8% higher
# clock). TRIED's largest lead, hiding the 128-token epilogue (3 consumer warpgroups, or the
# activation on warps that do not decode), rests on those short-timing numbers; this measures
# them where the targets are judged, and ncu says how much is cycles and how much clock.
#
# Branch probe (8815fa4 on main 3c9e6ec, timing only, never merged): FP4MOE_RSWS_PROBE on the
# 128-token rsws launches of NVFP4 weights (the wide-width and rsws4 launches unchanged):
#   1  GEMM 1's epilogue stores bf16(gate * up): its conversions and stores without the
#      activation. What hiding the activation could win at most: a hiding design still has the
#      consumers hand their accumulators off (stores), but not the ~25 instructions a value.
#   2  no weight decode in either GEMM: A is each weight word masked into weight-sized bf16
#      values (one LOP3 a register). What the decode costs under the cap.
#   3  both.
#   0  the kernels as built (main 3c9e6ec's; the variant `main`).
# Wrong results by design (--check FAILs for 1-3); `main` is checked in round 1.
# Build here first (if .carry/pr is missing):
#   git worktree add -f /tmp/wt-probe probe && cmake -S /tmp/wt-probe -B /tmp/wt-probe/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && ninja -C /tmp/wt-probe/build fp4moe
#   mkdir -p .carry/pr && strip -o /tmp/p /tmp/wt-probe/build/fp4moe && xz -T2 -6 -c /tmp/p > .carry/pr/cli.xz
# Run (~560 s), carry [".carry/pr"]:
#   bash bench/results/2026-12-04-v65/next-probe.sh
# The A/B main / p1 / p2 / p3 at three 128-token-tile points, point-major, 2 rounds if time allows,
# clocks logged; then ncu of the four variants' rsws launches at qwen3-235b T = 16384 with the SM
# clock (scripts/ncu_breakdown.py prints cycles). The bench's clock line under each row gives
# ab_report a second table: each variant's SM clock and its change in cycles (µs x MHz).
# Reading p1: close to v26's no-epilogue share under the cap, in cycles as well as time: hiding
# the activation pays, and the 3-warpgroup / producer-activation design is worth writing; much
# less, or the same cycles at a lower clock: the cap takes the idle tensor cycles back, close the
# lead. p2 likewise for the decode (the 256-token tile and every decode trim at T >= 8192).
set -u
source scripts/device_lib.sh
unxz .carry/pr/cli.xz .carry/bin/fp4moe_bin_pr
for v in 0 1 2 3; do
  name=p$v; [ $v = 0 ] && name=main
  env_variant $name .carry/bin/fp4moe_bin_pr "FP4MOE_RSWS_PROBE=$v"
done
clocks_start 200
ab_rounds_by_point 380 450 "main p1 p2 p3" "qwen3-235b:w4a16:16384 kimi-k2:w4a16:16384 qwen3-30b:w4a16:8192"
clocks_stop
ab_report main
mkdir -p "$OUT/ncu"
for v in 0 1 2 3; do
  ok 520 || break
  FP4MOE_RSWS_PROBE=$v timeout 45 ncu --clock-control none -k regex:sm90_rsws --launch-count 4 \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__m_xbar2l1tex_read_bytes.sum.per_second \
    --csv --print-units base .carry/bin/fp4moe_bin_pr bench --model qwen3-235b --tokens 16384 --iters 1 --copies 1 \
    --warmup-ms 0 --no-check --no-ceilings --no-baseline > "$OUT/ncu/probe-$v.csv" 2> "$OUT/ncu/probe-$v.err"
  echo "ncu probe $v rc=$?"
  python3 scripts/ncu_breakdown.py "$OUT/ncu/probe-$v.csv" | head -6
done
(cd "$OUT" && tar czf ncu.tgz ncu clocks.csv && rm -rf ncu)
