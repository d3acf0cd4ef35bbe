#!/usr/bin/env bash
# v24 call 3: ncu of the sm80 fast path on main ad06bcc, 8-token tiles (kimi-k2 T = 32 / 128, at
# 89-96% of the floor) against 16-token tiles (kimi-k2 T = 512, 71%; qwen3-235b T = 128, 78%):
# GEMM 1 and GEMM 2 of the first forward, pipes, stalls, memory, occupancy, SASS samples.
set -u
start=$(date +%s)
Z=.carry/z24; mkdir -p .carry/bin $OUT/ncu
gunzip -c $Z/main.gz > .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for case in kimi-k2@512 kimi-k2@128 qwen3-235b@128 kimi-k2@32; do
  ok 420 || { echo "skip $case"; continue; }
  m=${case%@*} tok=${case#*@}; rep=$OUT/ncu/$m-$tok
  timeout 150 ncu --clock-control none -k regex:sm80_grouped_gemm --launch-count 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section SourceCounters -f -o $rep \
    --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_read.sum,lts__t_bytes.sum \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --warmup 0 --sets 1 --copies 1 --no-check \
    --no-ceilings --no-baseline > $rep.log 2>&1
  echo "$case rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $rep.ncu-rep --page details --csv > $rep-details.csv 2>>$rep.log
  ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep-src.csv 2>>$rep.log
done
cd $OUT/ncu
for f in *-details.csv; do
  echo "== $f"
  python3 - "$f" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = ["Duration", "DRAM Throughput", "L2 Cache Throughput", "Compute (SM) Throughput", "Issue Slots Busy",
        "Achieved Occupancy", "Registers Per Thread", "Block Limit Registers", "Warp Cycles Per Issued Instruction",
        "SM Frequency", "Executed Ipc Active", "Theoretical Occupancy", "Grid Size", "Dynamic Shared Memory Per Block"]
seen = {}
for r in rows:
    k = (r.get("ID"), r.get("Metric Name"))
    if r.get("Metric Name") in want or "pipe" in r.get("Metric Name","") or "__" in r.get("Metric Name",""): seen[k] = r.get("Metric Value") + " " + r.get("Metric Unit", "")
for k in sorted(seen): print(k[0], k[1], seen[k])
PY
done
cd $OUT && tar czf all.tgz ncu
