#!/usr/bin/env bash
# v25 call 5: ncu of f7b2f36's fast path at 16-token tiles (kimi-k2 T = 512, qwen3-235b T = 128), as
# v24 call 3 did on ad06bcc: GEMM 1 and GEMM 2 of the first forward; pipes, stalls, memory, occupancy.
set -u
start=$(date +%s)
Z=.carry/z27; mkdir -p .carry/bin $OUT/ncu
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for case in qwen3-235b@128 kimi-k2@512 kimi-k2@128; do
  ok 170 || { echo "skip $case"; continue; }
  m=${case%@*} tok=${case#*@}; rep=$OUT/ncu/$m-$tok
  timeout 90 ncu --clock-control none -k regex:sm80_grouped_gemm --launch-count 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats -f -o $rep \
    --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_read.sum,lts__t_bytes.sum \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --warmup 0 --sets 1 --copies 1 --no-check \
    --no-ceilings --no-baseline > $rep.log 2>&1
  echo "$case rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $rep.ncu-rep --page details --csv > $rep-details.csv 2>>$rep.log
  rm -f $rep.ncu-rep
done
cd $OUT/ncu
for f in *-details.csv; do
  echo "== $f"
  python3 - "$f" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = ["Duration", "DRAM Throughput", "Issue Slots Busy", "Achieved Occupancy", "Registers Per Thread",
        "Block Limit Registers", "Warp Cycles Per Issued Instruction", "SM Frequency", "Executed Ipc Active"]
for r in rows:
    n = r.get("Metric Name", "")
    if n in want or n.startswith(("sm__", "dram__", "smsp__inst")) or n.startswith("Stall"):
        print(r.get("ID"), n, r.get("Metric Value"), r.get("Metric Unit", ""))
PY
done
cd $OUT && tar czf all.tgz ncu
