#!/usr/bin/env bash
# v49 call 4 (carry .carry/m49: main's CLI; .carry/probe: graph_floor): ncu of the route kernel
# at T = 1 (qwen3-30b: softmax over 128 experts, top 8; kimi-k2: sigmoid over 384, one group,
# top 8; deepseek-v3: 8 groups of 32, 4 kept) and of an empty kernel (graph_floor's), for the
# kernels' own durations and where the route kernel's one warp stalls.
set -u
source scripts/device_lib.sh
unxz .carry/m49/cli.xz .carry/bin/fp4moe
mkdir -p $OUT/c4
SECT="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section InstructionStats"
run_ncu() {  # name kernel-regex count command...
  local name=$1 k=$2 c=$3; shift 3
  timeout 120 ncu --clock-control none -k regex:$k -s 3 -c $c $SECT -o $OUT/c4/$name "$@" > $OUT/c4/$name.run.txt 2>&1
  echo "$name rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $OUT/c4/$name.ncu-rep --page details > $OUT/c4/$name.details.txt 2>&1
  ncu --import $OUT/c4/$name.ncu-rep --page source --csv --print-source sass > $OUT/c4/$name.sass.csv 2>&1
  grep -E "Duration|Executed Instructions  |Warp Cycles Per Issued|Elapsed Cycles|SM Frequency" $OUT/c4/$name.details.txt | head -12
}
for m in qwen3-30b kimi-k2 deepseek-v3; do
  ok 400 && run_ncu route-$m route_kernel 1 .carry/bin/fp4moe bench --model $m --tokens 1 --iters 2 --warmup 1 --no-baseline --no-ceilings
done
ok 400 && run_ncu empty empty_kernel 1 .carry/probe/graph_floor
for f in $OUT/c4/route-*.sass.csv; do echo "== $f"; python3 scripts/ncu_source_top.py $f --top 25 2>&1 | head -60; done
(cd $OUT && tar czf c4.tgz c4 && rm -rf c4)
echo "done t=$(( $(date +%s) - start ))"
