#!/usr/bin/env bash
# v55 call 3 (carry [".carry/t55", ".carry/r55"]: main 181973f's test binary and CLI, sm_90a,
# stripped, xz). Main's whole test binary, EP apart, then where each GEMM kernel's time goes at
# the table's points: ncu, every kernel of one forward (serialized, --clock-control none), its
# duration, DRAM throughput, issue slots busy, ALU / FMA / uniform / tensor pipes, warps resident
# and SM clock (scripts/ncu_breakdown.py prints them as columns). ~500 s.
set -u
source scripts/device_lib.sh
unxz .carry/t55/tests.xz .carry/bin/fp4moe_tests
unxz .carry/r55/cli.xz .carry/bin/fp4moe
suite_shards
echo "suite t=$(( $(date +%s) - start ))"
ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | grep -E '^sm__(pipe_tensor_op_(gmma|hmma)_cycles_active|inst_executed_pipe_tensor_op_(gmma|hmma))$' > $OUT/tensor-metrics.txt
tensor=$(sed -n 's/^sm__pipe_tensor_op_\(.*\)_cycles_active$/sm__pipe_tensor_op_\1_cycles_active.avg.pct_of_peak_sustained_active/p' $OUT/tensor-metrics.txt | paste -sd,)
echo "tensor metrics: ${tensor:-none}"
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics=$metrics,smsp__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
metrics=$metrics,smsp__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
metrics=$metrics,sm__cycles_elapsed.avg.per_second${tensor:+,$tensor}
mkdir -p $OUT/ncu
for point in kimi-k2@1 kimi-k2@8 kimi-k2@32 kimi-k2@128 kimi-k2@512 kimi-k2@2048 kimi-k2@8192 kimi-k2@16384 \
             qwen3-235b@128 qwen3-235b@512 qwen3-235b@2048 qwen3-30b@1 qwen3-30b@512; do
  ok 560 || break
  m=${point%@*} tok=${point#*@}
  f=$OUT/ncu/$m-$tok
  timeout 120 ncu --clock-control none --metrics $metrics --launch-skip 0 --launch-count 30 --csv --print-units base \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --copies 1 --warmup-ms 0 --no-check --no-ceilings --no-baseline \
    > $f.csv 2> $f.err
  echo "== $m T=$tok rc=$? t=$(( $(date +%s) - start ))"
  python3 scripts/ncu_breakdown.py $f.csv 2>&1 | tee $f.txt | head -12
done
(cd $OUT && tar czf ncu.tgz ncu tensor-metrics.txt && rm -rf ncu)
cat $OUT/suite-summary.txt
