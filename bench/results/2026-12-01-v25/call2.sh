#!/usr/bin/env bash
# v25 call 2, main f7b2f36 (two barrier groups per iteration, the kernel split into two files):
# the whole test binary (EP apart, 8 shards) and pytest beside it; racecheck of the GEMM and
# layer tests (8 shards); then full JSON runs of kimi-k2 W4A16 and W4A4.
set -u
start=$(date +%s)
Z=.carry/z27; mkdir -p .carry/bin .carry/include $OUT/tests $OUT/py $OUT/san $OUT/j
cp -r $Z/nlohmann .carry/include/
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz $Z/fp4moe_tests.xz .carry/bin/fp4moe_tests & unxz $Z/fp4moe.xz .carry/bin/fp4moe & wait
( OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=230 bash scripts/gpu_suite.sh tests > $OUT/tests.txt 2>&1 ) &
( OUT=$OUT/py PYTHON_TIMEOUT=240 bash scripts/gpu_suite.sh python > $OUT/py.txt 2>&1 ) &
wait
echo "t=$(( $(date +%s) - start )) s after suite"
grep -h "^== " $OUT/tests.txt $OUT/py.txt
grep -h "FAILED  \] [A-Z]" $OUT/tests/tests-*.log | head -20
F='CudaGemmSm80Tiles/*:CudaGemmCases/*:CudaLayer.*:CudaCombine.*:CudaPermute.*:CudaQuantize.*:CudaRouting.*:CudaGemmEdge.*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
    .carry/bin/fp4moe_tests --gtest_filter="$F" > $OUT/san/racecheck-$i.log 2>&1 &
done
wait
for i in 0 1 2 3 4 5 6 7; do f=$OUT/san/racecheck-$i.log
  echo "== racecheck shard $i: $(grep -c '^\[       OK \]' $f) ok, $(grep -c '^\[  FAILED  \]' $f) failed lines, $(grep -E 'RACECHECK SUMMARY' $f | tail -1)"
done
echo "t=$(( $(date +%s) - start )) s after racecheck"
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 575 - ($(date +%s) - start) )); [ $left -gt 60 ] || break
  [ $left -gt 170 ] && left=170
  timeout $left .carry/bin/fp4moe bench --model kimi-k2 --quant $q --tokens $T --check --json $OUT/j/2026-12-01-h200-v25-kimi-k2-$q.json > $OUT/j/kimi-$q.txt 2>&1; echo "kimi $q rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz tests py san j *.txt
