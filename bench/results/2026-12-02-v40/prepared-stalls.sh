#!/usr/bin/env bash
# Prepared for the next session (not run): why the one-kernel layer's decode issues at ~0.5 per
# cycle and scheduler (v40 §3). Needs a carried CLI at .carry/<dir>/cli.xz (the first argument).
# ncu's per-reason stall samples of the kernel at kimi-k2 T = 1: as built, and with the stamps'
# probe 2 (the decode and MMAs alone, no copies: the consumers' own stalls). ~150 s.
set -u
source scripts/device_lib.sh
unxz .carry/$1/cli.xz .carry/bin/fp4moe_main
for probe in 0 2; do
  env=""
  [ $probe = 2 ] && env="FP4MOE_LAYER_PROBE=2 FP4MOE_LAYER_TRACE=$OUT/trace-p2.txt"
  env FP4MOE_DECODE_LAYER=1 $env timeout 200 ncu --clock-control none -k regex:decode_layer -c 1 \
    --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,smsp__issue_active.avg.per_cycle_active,smsp__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active \
    .carry/bin/fp4moe_main bench --model kimi-k2 --tokens 1 --iters 2 --warmup 1 --check --no-baseline --no-ceilings \
    > $OUT/ncu-p$probe.txt 2>&1
  echo "probe $probe rc=$? t=$(( $(date +%s) - start ))"
  grep -E "pcsamp|issue_active|pipe_" $OUT/ncu-p$probe.txt | sort -k3 -n -r | head -14
done
