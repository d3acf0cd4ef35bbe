#!/usr/bin/env bash
# Prepared in v27, for the next session: deepseek-v3's full JSON runs on main's kernels (the
# `full` CLI of .carry/z33, the same SASS as 85aebea; carry [".carry/z33"]), W4A16 and W4A4. ~300 s.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/j
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z33/full.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
T=1,8,32,128,512,2048,8192,16384
for q in w4a16 w4a4; do
  left=$(( 330 - ($(date +%s) - start) )); [ $left -gt 90 ] || break
  [ $left -gt 160 ] && left=160
  timeout $left .carry/bin/fp4moe bench --model deepseek-v3 --quant $q --tokens $T --check \
    --json $OUT/j/h200-deepseek-v3-$q.json > $OUT/j/ds-$q.txt 2>&1; echo "deepseek $q rc=$? t=$(( $(date +%s) - start ))"
done
grep -c PASS $OUT/j/*.txt; grep -l FAIL $OUT/j/*.txt
python3 scripts/bench_table.py $OUT/j/*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" | awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
cd $OUT && tar czf all.tgz j
