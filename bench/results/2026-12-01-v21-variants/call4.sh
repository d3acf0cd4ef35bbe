#!/usr/bin/env bash
# v21 call 4: where the wgmma path takes over from the fast path (now with its 24/32-token tiles): kSm90MinRowsPerExpert 16 (main) against 25, MX 32 against 48.
set -u
start=$(date +%s)
Z=.carry/z15; gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/b
mkdir -p $OUT/ab
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep env args...
  local n=$1 v=$2 rep=$3 e=$4; shift 4
  ok 330 || return
  env $e timeout 60 $Z/b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  run ds m16 $rep X=1 --model deepseek-v3 --tokens 512,640,768
  run ds m25 $rep FP4MOE_SM90_MIN_ROWS=25 --model deepseek-v3 --tokens 512,640,768
  run q235 m25 $rep FP4MOE_SM90_MIN_ROWS=25 --model qwen3-235b --tokens 256,384
  run q235 m16 $rep X=1 --model qwen3-235b --tokens 256,384
  run q30 m16 $rep X=1 --model qwen3-30b --tokens 256,384
  run q30 m25 $rep FP4MOE_SM90_MIN_ROWS=25 --model qwen3-30b --tokens 256,384
  run gpt m16 $rep X=1 --model gpt-oss-120b --tokens 1024,1280
  run gpt m25 $rep FP4MOE_SM90_MIN_ROWS_MX=48 --model gpt-oss-120b --tokens 1024,1280
  run kimi m25 $rep FP4MOE_SM90_MIN_ROWS=25 --model kimi-k2 --tokens 768,1024
  run kimi m16 $rep X=1 --model kimi-k2 --tokens 768,1024
done
run dsa4 m16 1 X=1 --model deepseek-v3 --quant w4a4 --tokens 512,768
run dsa4 m25 1 FP4MOE_SM90_MIN_ROWS=25 --model deepseek-v3 --quant w4a4 --tokens 512,768
echo "t=$(( $(date +%s) - start )) s"
python3 scripts/ab_summary.py $OUT/ab --base m16
cd $OUT && tar czf ab.tgz ab
