#!/usr/bin/env bash
# v24 call 1: GEMM / layer GPU tests on main + fast-load-mad-wide.diff ("mw"); then A/B
# base (main ad06bcc) | mw | preimad (1f6ecc2's kernels: the folded scale as LEA; deepseek-v3 only).
set -u
start=$(date +%s)
Z=.carry/z24; mkdir -p $OUT/t $OUT/ab
gunzip -c $Z/mw_tests.gz > $Z/tests && chmod +x $Z/tests
for v in base mw preimad; do gunzip -c $Z/$v.gz > $Z/$v && chmod +x $Z/$v; done
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
F='CudaGemmActivation*:CudaGemmCases/*:Kernels/*:CudaGemmSm90*:CudaGemmSm80Tiles/*:CudaLayer.*:CudaGemmEdge*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 150 $Z/tests --gtest_filter="$F" --gtest_brief=1 > $OUT/t/shard-$i.log 2>&1 &
done
wait
echo "t=$(( $(date +%s) - start )) s after tests"
grep -hE '^\[  (PASSED|FAILED|SKIPPED)  \]' $OUT/t/shard-*.log | sort | uniq -c
grep -h 'FAILED  \] [A-Z]' $OUT/t/shard-*.log | head -20
run() {  # name variant rep args...
  local n=$1 v=$2 rep=$3; shift 3
  ok 565 || return
  timeout 60 $Z/$v bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
timeout 40 $Z/mw bench --model kimi-k2 --quant w4a4 --tokens 8,128 --check --no-baseline --no-ceilings --iters 10 > $OUT/chk.txt 2>&1; echo "chk mw rc=$?"
for rep in 1 2; do
  for v in base mw; do run kimi $v $rep --model kimi-k2 --tokens 8,32,128,512; done
  for v in mw base; do run gpt $v $rep --model gpt-oss-120b --tokens 32,128; done
  for v in base mw; do run q235 $v $rep --model qwen3-235b --tokens 32,128; done
  for v in mw base; do run kimi4 $v $rep --model kimi-k2 --quant w4a4 --tokens 8,32,128; done
  for v in preimad base mw; do run ds $v $rep --model deepseek-v3 --tokens 32,128; done
done
echo "t=$(( $(date +%s) - start )) s"
grep -E "PASS|FAIL" $OUT/chk.txt | head -5
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab t chk.txt
