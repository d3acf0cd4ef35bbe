#!/usr/bin/env bash
# v25 call 1: two barrier groups per loop iteration on the fast path (v24 §9). Fast-path tests on grp and
# grpb (grpb1 = grpb's GEMM1 + grp's GEMM2); a --check run; then A/B base (main 67f6c3c) | grp | grpb
# (min CTAs 5 GEMM1 / 6 GEMM2) | grpb1 (5 on GEMM1 only).
set -u
start=$(date +%s)
Z=.carry/z26; mkdir -p $OUT/t $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
for v in base grp grpb grpb1; do unxz $Z/$v.xz $Z/$v & done
for v in grp grpb; do unxz $Z/${v}_tests.xz $Z/${v}_t & done
wait
echo "t=$(( $(date +%s) - start )) s after unpack"
F='CudaGemmSm80Tiles/*:CudaGemmCases/*_fast:CudaLayer.*:CudaGemmEdge*'
for v in grp grpb; do for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 150 $Z/${v}_t --gtest_filter="$F" --gtest_brief=1 > $OUT/t/$v-$i.log 2>&1 &
done; done
wait
echo "t=$(( $(date +%s) - start )) s after tests"
for v in grp grpb; do echo "$v: $(cat $OUT/t/$v-*.log | grep -E '^\[  (PASSED|FAILED)  \]' | tr '\n' ' ')"; done
grep -h 'FAILED  \] [A-Z]' $OUT/t/*.log | head -20
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name variant rep args...
  local n=$1 v=$2 rep=$3; shift 3
  ok 540 || return
  timeout 50 $Z/$v bench "$@" --iters 100 --no-check --no-baseline --no-ceilings > $OUT/ab/$n-$v-$rep.txt 2>&1
}
for v in grp grpb; do timeout 40 $Z/$v bench --model qwen3-235b --tokens 32,128 --check --no-baseline --no-ceilings --iters 10 > $OUT/chk-$v.txt 2>&1; echo "chk $v rc=$?"; done
for rep in 1 2; do
  for v in base grp grpb grpb1; do run kimi $v $rep --model kimi-k2 --tokens 32,128,512; done
  for v in grpb1 grpb grp base; do run q235 $v $rep --model qwen3-235b --tokens 32,128; done
done
for v in base grp grpb grpb1; do run gpt $v 1 --model gpt-oss-120b --tokens 32,128; done
echo "t=$(( $(date +%s) - start )) s"
grep -hE "PASS|FAIL" $OUT/chk-*.txt | cut -c1-160 | head -6
python3 scripts/ab_summary.py $OUT/ab --base base
cd $OUT && tar czf all.tgz ab t chk-*.txt
