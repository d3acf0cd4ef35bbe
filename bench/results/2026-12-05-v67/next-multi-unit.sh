#!/usr/bin/env bash
# Prepared in v67 for the next session (v67's device budget ran out before it could run): branch
# multi-unit (428221f on main f72e52b; worktree /tmp/wt-mu): fast-path CTAs over several
# (row tile, slot) units in turn, FP4MOE_SM80_UNITS=u (default 1, main's launch: one unit a CTA),
# each next unit's row tables and first group of loads issued before the current unit's
# epilogue. Why (v67 §3): on the small presets the fast path's DRAM rate is 57-64% of peak
# (qwen3-30b T = 32 / 128) against kimi-k2's 84-90% at the same occupancy; the SMs' idle share
# explains less than half of it, the rest is each short unit's start (slot search, row tables,
# first loads' latency) and epilogue. Carry [".carry/mu"]: the branch's fp4moe_tests and fp4moe
# (sm_90a, stripped, xz), rebuilt by
#   cmake -S /tmp/wt-mu -B /tmp/wt-mu/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a &&
#   ninja -C /tmp/wt-mu/build fp4moe_tests fp4moe && mkdir -p .carry/mu &&
#   strip -o /tmp/t /tmp/wt-mu/build/fp4moe_tests && xz -T2 -6 -c /tmp/t > .carry/mu/tests.xz &&
#   strip -o /tmp/c /tmp/wt-mu/build/fp4moe && xz -T2 -6 -c /tmp/c > .carry/mu/cli.xz
# (git worktree add /tmp/wt-mu multi-unit first where the worktree is gone.)
#   PART=tests (~500 s): its tests with the fast path's tile tests and the layer's conformance
#     table (stops on a failure: filter_tests names a hung test), memcheck / racecheck over the
#     units tests, then the A/B of the same binary at UNITS = 1 / 2 / 4 (1 is main's launch;
#     the branch's kernel at 1 is main's but for the loop's form: ptxas gives the 24- / 32-token
#     tiles 8-19 more registers, the 8- / 16-token ones the same) at the small presets'
#     fast-path rows and kimi-k2 T = 32, until ~480 s.
#   PART=suite (~300 s): the whole test binary, EP apart.
# Merge (with the default set from the A/B, by the rule's shape if it differs by preset) only
# after the suite passed and the A/B says it pays; a control against main's binary as well if
# UNITS = 1 reads differently from main.
set -u
source scripts/device_lib.sh
unxz .carry/mu/tests.xz .carry/bin/fp4moe_tests || exit 1
if [ "${PART:-tests}" = tests ]; then
  filter_tests '*Sm80Units*:CudaGemmSm80Tiles/*:Table/CudaLayerConformance.*' mu-tests 150
  if ! grep -q '^\[  PASSED  \]' "$OUT/mu-tests.txt" || grep -q '^\[  FAILED  \]' "$OUT/mu-tests.txt"; then
    echo "multi-unit tests did not pass: no sanitizers, no A/B"; exit 1
  fi
  sanitizers '*Sm80Units*' 120
  unxz .carry/mu/cli.xz .carry/bin/fp4moe_bin_mu || exit 1
  for u in 1 2 4; do env_variant u$u .carry/bin/fp4moe_bin_mu "FP4MOE_SM80_UNITS=$u"; done
  ab_rounds_by_point 420 480 "u1 u2 u4" \
    "qwen3-30b:w4a16:32,128 qwen3-30b:w4a4:128 gpt-oss-120b:w4a16:32,128 qwen3-235b:w4a16:32 kimi-k2:w4a16:32"
  ab_report u1
else
  suite_shards
fi
