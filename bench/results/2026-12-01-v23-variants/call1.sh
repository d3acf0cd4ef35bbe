#!/usr/bin/env bash
# v23 call 1: the whole suite on main + the folded scale as IMAD + the GEMM 2 epilogue's predicated stores ("both");
# then A/B base (main 1f6ecc2) | imad | epi | both.
set -u
start=$(date +%s)
Z=.carry/z20; mkdir -p .carry/bin && rm -rf .carry/include && cp -r $Z/include .carry/include
gunzip -c $Z/both_tests.gz > .carry/bin/fp4moe_tests && gunzip -c $Z/both.gz > .carry/bin/fp4moe && chmod +x .carry/bin/*
for v in fp4moe imad epi both; do gunzip -c $Z/$v.gz > $Z/$v && chmod +x $Z/$v; done
mv $Z/fp4moe $Z/base
mkdir -p $OUT/tests $OUT/py $OUT/ab
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=240 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=240 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s after tests"
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep args...
  local n=$1 v=$2 rep=$3; shift 3
  ok 560 || return
  timeout 70 $Z/$v bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for rep in 1 2; do
  for v in base imad epi both; do run q30 $v $rep --model qwen3-30b --tokens 32,128,512,2048,8192,16384; done
  for v in both epi imad base; do run gpt $v $rep --model gpt-oss-120b --tokens 128,2048,8192; done
done
for rep in 1 2; do
  for v in base both; do run kimi $v $rep --model kimi-k2 --tokens 128,2048,16384; done
done
echo "t=$(( $(date +%s) - start )) s"
for d in tests py; do echo "=== $d"; cat $OUT/$d/summary-*.txt 2>/dev/null | tail -12; done
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab tests py *.txt
