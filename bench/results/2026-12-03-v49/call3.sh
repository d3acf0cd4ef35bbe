#!/usr/bin/env bash
# v49 call 3 (carry .carry/probe: bench/probes/graph_floor.cu built with nvcc -arch=sm_90a;
# .carry/m49: main's CLI): the timing method's floor (graph_floor, ~1 min), then the T = 1 rows of
# qwen3-30b and gpt-oss-120b in the same call, for the same machine's numbers side by side.
set -u
source scripts/device_lib.sh
unxz .carry/m49/cli.xz .carry/bin/fp4moe
.carry/probe/graph_floor 2>&1 | tee $OUT/graph-floor.txt
for m in qwen3-30b gpt-oss-120b qwen3-235b; do
  timeout 60 .carry/bin/fp4moe bench --model $m --tokens 1,2 --iters 200 --no-baseline > $OUT/t1-$m.txt 2>&1
  grep -E '^ +(1|2) ' $OUT/t1-$m.txt | tr -s ' ' | sed "s/^/$m: /" | tee -a $OUT/t1.txt
done
echo "done t=$(( $(date +%s) - start ))"
