#!/usr/bin/env bash
# v32 call 3 (carry [".carry/z46"]: main 1028681's CLI, sm_90a; ~280 s): the fast path's token
# tile against its rule. Since v25 the 8-token loop streams 4.09 TB/s alone and the 16-token one
# 3.2-3.4 (v25 §5), but the rule (v21, before that) picks 16 wherever more than 8% of the experts
# would spill past 8 rows. A/B default | FP4MOE_SM80_TILE=8 | =16, one process per point,
# alternated, the first round with --check. (kimi-k2's preparation takes ~30 s a process: left out.)
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z46/cli.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
r=0
while ok 215; do
  r=$((r + 1)); chk=--no-check; [ $r = 1 ] && chk=--check
  for v in def t8 t16; do
    e=X=1; [ $v != def ] && e=FP4MOE_SM80_TILE=${v#t}
    for m in qwen3-235b:96,128,192:w4a16 qwen3-235b:128:w4a4 gpt-oss-120b:256,512:w4a16 qwen3-30b:128,192:w4a16; do
      ok 250 || break 3
      IFS=: read model tok q <<< "$m"
      env $e timeout 25 .carry/bin/fp4moe bench --model $model --quant $q --tokens $tok --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-$model-$q-r$r.txt 2>&1
    done
  done
done
echo "rounds $r t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
grep -h "token tile\|rows per active" $OUT/ab/def-*-r1.txt | sort | uniq -c | head
cd $OUT && for f in ab/*-r*.txt; do b=$(basename $f .txt); v=${b%%-*}; rest=${b#*-}; m=${rest%-r*}; \
  grep -E "^ +[0-9]+ +[0-9.]+ " $f | awk -v v=$v -v m=$m '{print m, $1, v, $2}'; done | sort | \
  awk '{k=$1" "$2" "$3; a[k]=a[k]" "$4} END{for(k in a) print k, a[k]}' | sort -k1,1 -k2,2n -k3,3
tar czf ab.tgz ab && rm -rf ab
