#!/usr/bin/env bash
# Under the split's PDL chain: the split below 4 waves (SPLIT_WAVES=2) and the split's widths below 10 (WIDTH_WAVES=5), qwen3-30b.
set -u
start=$(date +%s)
Z=.carry/z10; R=$OUT/ab; mkdir -p $R
gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/b
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep env args...
  local n=$1 v=$2 rep=$3 e=$4; shift 4
  ok 420 || return
  env $e timeout 60 $Z/b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $R/$n-$v-$rep.txt 2>&1
}
T=1024,2048,4096,8192,16384
for rep in 1 2; do
  run q30a16 main $rep X=1 --model qwen3-30b --tokens $T
  run q30a16 s2 $rep FP4MOE_SM90_SPLIT_WAVES=2 --model qwen3-30b --tokens $T
  run q30a16 w5 $rep FP4MOE_SM90_WIDTH_WAVES=5 --model qwen3-30b --tokens $T
  run q30a16 s2w5 $rep "FP4MOE_SM90_SPLIT_WAVES=2 FP4MOE_SM90_WIDTH_WAVES=5" --model qwen3-30b --tokens $T
  run q30a4 w5 $rep FP4MOE_SM90_WIDTH_WAVES=5 --model qwen3-30b --quant w4a4 --tokens 2048,4096,8192
  run q30a4 main $rep X=1 --model qwen3-30b --quant w4a4 --tokens 2048,4096,8192
  run q235e64 main $rep X=1 --model qwen3-235b --experts 64 --tokens 1024,2048,4096
  run q235e64 w5 $rep FP4MOE_SM90_WIDTH_WAVES=5 --model qwen3-235b --experts 64 --tokens 1024,2048,4096
done
echo "t=$(( $(date +%s) - start )) s"
python3 scripts/ab_summary.py $R --base main
cd $OUT && tar czf ab.tgz ab
