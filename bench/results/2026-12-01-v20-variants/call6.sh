#!/usr/bin/env bash
# The split's widths from 5 waves and the split from 2 with its wide width: the whole suite, --check, A/B against c782a90.
set -u
start=$(date +%s)
Z=.carry/z11; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/fp4moe_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/fp4moe.gz > .carry/bin/fp4moe && gunzip -c $Z/base.gz > $Z/base && chmod +x .carry/bin/* $Z/base
mkdir -p $OUT/tests $OUT/py $OUT/ab $OUT/r
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=300 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=300 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
B=.carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
for q in w4a16 w4a4; do timeout 60 $B bench --model qwen3-30b --quant $q --tokens 1024,2048 --check --no-baseline > $OUT/r/check-q30-$q.txt 2>&1; echo "rc=$?" >> $OUT/r/check-q30-$q.txt; done
timeout 60 $B bench --model qwen3-235b --experts 64 --tokens 512,1024 --check --no-baseline > $OUT/r/check-q235e64.txt 2>&1; echo "rc=$?" >> $OUT/r/check-q235e64.txt
echo "t=$(( $(date +%s) - start )) s after checks"
run() {  # name variant rep binary args...
  local n=$1 v=$2 rep=$3 b=$4; shift 4
  ok 490 || return
  timeout 60 $b bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2 3; do
  run q30a16 old $rep $Z/base --model qwen3-30b --tokens 1024,2048,4096,8192
  run q30a16 main $rep $B --model qwen3-30b --tokens 1024,2048,4096,8192
  run q30a4 main $rep $B --model qwen3-30b --quant w4a4 --tokens 1024,2048,4096
  run q30a4 old $rep $Z/base --model qwen3-30b --quant w4a4 --tokens 1024,2048,4096
  run q235e64 old $rep $Z/base --model qwen3-235b --experts 64 --tokens 512,1024,2048
  run q235e64 main $rep $B --model qwen3-235b --experts 64 --tokens 512,1024,2048
  run q235 main $rep $B --model qwen3-235b --tokens 512,1024
  run q235 old $rep $Z/base --model qwen3-235b --tokens 512,1024
done
run dsv3 old 1 $Z/base --model deepseek-v3 --tokens 2048
run dsv3 main 1 $B --model deepseek-v3 --tokens 2048
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; cat $OUT/$d/summary-*.txt; done
for f in $OUT/r/*; do echo "== $f"; grep -E "^ +[0-9]+ |rc=" $f; done
python3 scripts/ab_summary.py $OUT/ab --base old
cd $OUT && tar czf all.tgz ab r tests py *.txt
