#!/usr/bin/env bash
# v41 call 1 (main cc3f4e1, code d2f1719): the one-kernel tests (d2f1719 had not run on the GPU),
# then ncu's stall reasons and per-instruction samples at kimi-k2 T = 1 W4A16 for
#   chain: the default chain's decode kernels (GEMM 1 and GEMM 2);
#   p0:    the one-kernel layer as built;  p2: its probe 2 (decode and MMAs alone, no copies).
set -u
source scripts/device_lib.sh
C=.carry/$1
unxz $C/cli.xz .carry/bin/fp4moe_main
unxz $C/tests.xz .carry/bin/fp4moe_tests
mkdir -p $OUT/c1
stdbuf -oL timeout 90 .carry/bin/fp4moe_tests --gtest_filter='CudaLayer.OneKernel*:CudaLayer.OneToken*' > $OUT/c1/onekernel-tests.log 2>&1
echo "onekernel tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/c1/onekernel-tests.log | tr '\n' ' ') t=$(( $(date +%s) - start ))"
BENCH="bench --model kimi-k2 --tokens 1 --iters 2 --warmup 1 --check --no-baseline --no-ceilings"
SECT="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis --section InstructionStats"
run_ncu() {  # name kernel-regex count env...
  local name=$1 k=$2 c=$3; shift 3
  env "$@" timeout 170 ncu --clock-control none -k regex:$k -c $c $SECT -o $OUT/c1/$name .carry/bin/fp4moe_main $BENCH > $OUT/c1/$name.run.txt 2>&1
  echo "$name rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $OUT/c1/$name.ncu-rep --page details > $OUT/c1/$name.details.txt 2>&1
  ncu --import $OUT/c1/$name.ncu-rep --page source --csv --print-source sass > $OUT/c1/$name.sass.csv 2>&1
  grep -E "Duration|Issued Ipc|Warp Cycles Per Issued|Active Warps Per|Eligible Warps" $OUT/c1/$name.details.txt | head -12
}
ok 400 && run_ncu chain decode_grouped_gemm 2 X=1
ok 400 && run_ncu p0 decode_layer 1 FP4MOE_DECODE_LAYER=1
ok 400 && run_ncu p2 decode_layer 1 FP4MOE_DECODE_LAYER=1 FP4MOE_LAYER_PROBE=2 FP4MOE_LAYER_TRACE=$OUT/c1/trace-p2.txt
grep -h "PASS\|FAIL" $OUT/c1/*.run.txt | head -6
(cd $OUT && tar czf c1.tgz c1 && rm -rf c1)
ls -la $OUT
