#!/usr/bin/env bash
# main (sm90-split-pdl merged) + the width split's gain rule: the whole suite, --check, the A/B against the old rule.
set -u
start=$(date +%s)
Z=.carry/z10; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
mkdir -p $OUT/tests $OUT/py $OUT/ab $OUT/r
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=300 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=300 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
B=.carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for q in w4a16 w4a4; do timeout 60 $B bench --model qwen3-30b --quant $q --tokens 256,384,512 --check --no-baseline > $OUT/r/check-q30-$q.txt 2>&1; echo "rc=$?" >> $OUT/r/check-q30-$q.txt; done
timeout 60 $B bench --model qwen3-235b --experts 64 --tokens 128 --check --no-baseline > $OUT/r/check-q235e64.txt 2>&1; echo "rc=$?" >> $OUT/r/check-q235e64.txt
run() {  # name variant rep env args...
  local n=$1 v=$2 rep=$3 e=$4; shift 4
  ok 500 || return
  env $e timeout 60 $B bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2 3; do
  run q30a16 old $rep FP4MOE_SM90_WIDTH_WAVES=10 --model qwen3-30b --tokens 128,256,384,512,768,1024
  run q30a16 main $rep X=1 --model qwen3-30b --tokens 128,256,384,512,768,1024
  run q30a4 main $rep X=1 --model qwen3-30b --quant w4a4 --tokens 256,384,512,768
  run q30a4 old $rep FP4MOE_SM90_WIDTH_WAVES=10 --model qwen3-30b --quant w4a4 --tokens 256,384,512,768
  run q235e64 old $rep FP4MOE_SM90_WIDTH_WAVES=10 --model qwen3-235b --experts 64 --tokens 128,256,384,512
  run q235e64 main $rep X=1 --model qwen3-235b --experts 64 --tokens 128,256,384,512
  run q30e64 main $rep X=1 --model qwen3-30b --experts 64 --tokens 128,256,384,512
  run q30e64 old $rep FP4MOE_SM90_WIDTH_WAVES=10 --model qwen3-30b --experts 64 --tokens 128,256,384,512
  run q30e32 old $rep FP4MOE_SM90_WIDTH_WAVES=10 --model qwen3-30b --experts 32 --tokens 64,128,256
  run q30e32 main $rep X=1 --model qwen3-30b --experts 32 --tokens 64,128,256
  run q30skew main $rep X=1 --model qwen3-30b --skew --tokens 256,512
  run q30skew old $rep FP4MOE_SM90_WIDTH_WAVES=10 --model qwen3-30b --skew --tokens 256,512
done
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; cat $OUT/$d/summary-*.txt; done
for f in $OUT/r/*; do echo "== $f"; grep -E "^ +[0-9]+ |rc=" $f; done
python3 scripts/ab_summary.py $OUT/ab --base old
cd $OUT && tar czf all.tgz ab r tests py *.txt
