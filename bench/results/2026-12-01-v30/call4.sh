#!/usr/bin/env bash
# v30 call 4: the Python suite on main (531729e; the package built here, sm_90a), then
# deepseek-v3's full JSON runs on main's kernels (.carry/z42/main.xz) as far as the time allows.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/j
FP4MOE_PYTHON_CUDA=1 FP4MOE_CUDA_ARCHS=90a timeout 260 bash scripts/test_python.sh -q > $OUT/pytest.log 2>&1
echo "python rc=$? t=$(( $(date +%s) - start ))"; tail -4 $OUT/pytest.log
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z42/main.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 440 - ($(date +%s) - start) )); [ $left -gt 100 ] || break
  [ $left -gt 160 ] && left=160
  timeout $left .carry/bin/fp4moe bench --model deepseek-v3 --quant $q --tokens $T --check \
    --json $OUT/j/2026-12-01-h200-v30-deepseek-v3-$q.json > $OUT/j/ds-$q.txt 2>&1; echo "deepseek $q rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j pytest.log
