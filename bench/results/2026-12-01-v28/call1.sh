#!/usr/bin/env bash
# v28 call 1: main 6c748b9 (CLI and tests built here, sm_90a, in .carry/z36; carry [".carry/z36"]).
# The whole test binary, EP apart, in 8 shards (the two sweeps refactored in 6c748b9 included),
# then deepseek-v3's full JSON runs, W4A16 and W4A4.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/j
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z36/tests.xz .carry/bin/fp4moe_tests; unxz .carry/z36/cli.xz .carry/bin/fp4moe
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
grep -h "Bf16Rounding\|EveryInput\|Midpoint" $OUT/tests/tests-*.log | grep "OK \]" | head
echo "suite t=$(( $(date +%s) - start ))"
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 560 - ($(date +%s) - start) )); [ $left -gt 90 ] || break
  [ $left -gt 170 ] && left=170
  timeout $left .carry/bin/fp4moe bench --model deepseek-v3 --quant $q --tokens $T --check \
    --json $OUT/j/2026-12-01-h200-v28-deepseek-v3-$q.json > $OUT/j/ds-$q.txt 2>&1; echo "deepseek $q rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf tests.tgz tests && rm -rf tests
