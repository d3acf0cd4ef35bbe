#!/usr/bin/env bash
# The split's PDL A/B (two runs each, alternated) and the waves thresholds lowered.
set -u
start=$(date +%s)
Z=$(dirname "$0"); R=$OUT/r; mkdir -p $R/ab
gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/b
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # model tokens variant rep env...
  local m=$1 t=$2 v=$3 rep=$4; shift 4
  ok 540 || return
  env "$@" timeout 60 $Z/b bench --model $m --tokens $t --iters 100 --no-check --no-baseline --no-ceilings > $R/ab/$m-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  run deepseek-v3 512,2048 main $rep FP4MOE_SM90_PDL=0; run deepseek-v3 512,2048 pdl $rep FP4MOE_SM90_PDL=1
  run kimi-k2 2048,4096 pdl $rep FP4MOE_SM90_PDL=1; run kimi-k2 2048,4096 main $rep FP4MOE_SM90_PDL=0
done
for m in qwen3-30b qwen3-235b; do
  run $m 256,512 main 1 FP4MOE_SM90_PDL=1
  run $m 256,512 width5 1 FP4MOE_SM90_WIDTH_WAVES=5
  run $m 256,512 split3 1 FP4MOE_SM90_SPLIT_WAVES=3
  run $m 256,512 both 1 FP4MOE_SM90_SPLIT_WAVES=3 FP4MOE_SM90_WIDTH_WAVES=5
done
echo "t=$(( $(date +%s) - start )) s"
cd $R/ab && for f in *; do printf "%-28s %s\n" $f "$(grep -E '^ +[0-9]+ ' $f | awk '{printf "%s:%s ", $1, $2}')"; done
