#!/usr/bin/env bash
# The width split's waves threshold (FP4MOE_SM90_WIDTH_WAVES) under the split's PDL chain: 10 (main) against lower.
set -u
start=$(date +%s)
Z=.carry/z9; R=$OUT/ab; mkdir -p $R
gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/b
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep waves args...
  local n=$1 v=$2 rep=$3 w=$4; shift 4
  ok 480 || return
  FP4MOE_SM90_WIDTH_WAVES=$w timeout 60 $Z/b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $R/$n-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  run q30a16 main $rep 10 --model qwen3-30b --tokens 256,384,512,768,1024
  run q30a16 w5 $rep 5 --model qwen3-30b --tokens 256,384,512,768,1024
  run q30a4 w5 $rep 5 --model qwen3-30b --quant w4a4 --tokens 256,384,512,768,1024
  run q30a4 main $rep 10 --model qwen3-30b --quant w4a4 --tokens 256,384,512,768,1024
  run q235e64 main $rep 10 --model qwen3-235b --experts 64 --tokens 128,256,384,512
  run q235e64 w5 $rep 5 --model qwen3-235b --experts 64 --tokens 128,256,384,512
  run q30e64 w2 $rep 2 --model qwen3-30b --experts 64 --tokens 128,256,384,512
  run q30e64 main $rep 10 --model qwen3-30b --experts 64 --tokens 128,256,384,512
done
run q30skew main 1 10 --model qwen3-30b --skew --tokens 256,512,1024
run q30skew w5 1 5 --model qwen3-30b --skew --tokens 256,512,1024
echo "t=$(( $(date +%s) - start )) s"
python3 scripts/ab_summary.py $R --base main
cd $OUT && tar czf ab.tgz ab
