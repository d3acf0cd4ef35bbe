#!/usr/bin/env bash
# v61 call 3 (carry [".carry/mn61", ".carry/pr61"]: main's CLI, sm_90a, stripped, xz; the probe
# built from bench/probes/rs_overlap.cu with its v61 kinds). The probe's alu_probe rows alone
# (do the wgmma take the other warps' register reads or their issue?), then ncu of every kernel
# of one forward at the T = 512 / 2048 points no profile has covered (deepseek-v3, gpt-oss-120b),
# as v55's call 3. ~250 s.
set -u
source scripts/device_lib.sh
chmod +x .carry/pr61/rs_overlap
.carry/pr61/rs_overlap 12000 alu > "$OUT/probe-alu.txt" 2>&1
echo "probe rc=$?"
cat "$OUT/probe-alu.txt"
[ -x .carry/bin/fp4moe ] || unxz .carry/mn61/cli.xz .carry/bin/fp4moe
ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | grep -E '^sm__(pipe_tensor_op_(gmma|hmma)_cycles_active|inst_executed_pipe_tensor_op_(gmma|hmma))$' > $OUT/tensor-metrics.txt
tensor=$(sed -n 's/^sm__pipe_tensor_op_\(.*\)_cycles_active$/sm__pipe_tensor_op_\1_cycles_active.avg.pct_of_peak_sustained_active/p' $OUT/tensor-metrics.txt | paste -sd,)
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics=$metrics,smsp__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
metrics=$metrics,smsp__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
metrics=$metrics,sm__cycles_elapsed.avg.per_second${tensor:+,$tensor}
mkdir -p $OUT/ncu
for point in deepseek-v3@512 gpt-oss-120b@512 deepseek-v3@2048 gpt-oss-120b@2048; do
  ok 400 || break
  m=${point%@*} tok=${point#*@}
  f=$OUT/ncu/$m-$tok
  timeout 120 ncu --clock-control none --metrics $metrics --launch-skip 0 --launch-count 30 --csv --print-units base \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --copies 1 --warmup-ms 0 --no-check --no-ceilings --no-baseline \
    > $f.csv 2> $f.err
  echo "== $m T=$tok rc=$? t=$(( $(date +%s) - start ))"
  python3 scripts/ncu_breakdown.py $f.csv 2>&1 | tee $f.txt
done
(cd $OUT && cat ncu/*.txt > breakdown.txt; tar czf ncu.tgz ncu tensor-metrics.txt && rm -rf ncu)
