#!/usr/bin/env bash
# Prepared in v32 (carry [".carry/z46"]: main 1028681's CLI, sm_90a). No build needed.
#   bash prepared-tile.sh tile      (~420 s): the fast path's token tile against its rule (below);
#   bash prepared-tile.sh minrows   (~420 s): wgmma against the fast path at 16-24 rows per expert
#     (FP4MOE_SM90_MIN_ROWS=25 / _MX=25 hand those shapes to the fast path). v21 §5 measured the
#     fast path there +6 to +16% slower, before v24 / v25 cut its loop by 10-19% (-4 to -8%):
#     qwen3 T = 256 / 320 / 384, gpt-oss-120b and deepseek-v3 T = 512 / 640 / 768 (16 / 20 / 24 rows).
# The fast path's 16- against 24-token tile where its rule picks 24: 11.6-16 rows per active
# expert (P(rows > 16) > kSm80TileMaxSpill = 8%; from 16 rows wgmma runs). v32 call 3: at 12
# rows 16 won (qwen3-30b T = 192 -4.2%, qwen3-235b -1.5%); 13-15 rows unmeasured. This A/B
# gives the crossover, so that the 16 -> 24 step gets its own spill threshold. The 8 -> 16 step
# too: at 6 rows 8 and 16 tied (v32 call 3); 5.5 and 6.5 rows run here.
# A cost model from v32's two points (the 24-token loop ~12-15% dearer per weight byte than the
# 16-token one, which is ~15% dearer than the 8-token one) puts both crossovers near 12-15% spill
# (about 12.5-13 and 6 rows), not the rule's 8%.
# default | FP4MOE_SM80_TILE=8 | =16 | =24, one process per point, alternated, the first round --check.
# Rows per expert 5.5 / 6.5 / 12 / 13 / 14 / 15: qwen3 T = 88 / 104 / 192 / 208 / 224 / 240,
# gpt-oss-120b and deepseek-v3 T = twice those (deepseek-v3 in the first round only: ~30 s a process).
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z46/cli.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
mode=${1:-tile}
r=0
if [ $mode = minrows ]; then
  while ok 330; do
    r=$((r + 1)); chk=--no-check; [ $r = 1 ] && chk=--check
    for v in def fast; do
      e=X=1; [ $v = fast ] && e="FP4MOE_SM90_MIN_ROWS=25 FP4MOE_SM90_MIN_ROWS_MX=25"
      ms="qwen3-30b:256,320,384 qwen3-235b:256,320,384 gpt-oss-120b:512,640,768"
      [ $r -le 2 ] && ms="$ms deepseek-v3:512,640,768"
      for m in $ms; do
        ok 380 || break 3
        env $e timeout 40 .carry/bin/fp4moe bench --model ${m%%:*} --tokens ${m#*:} --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
      done
    done
  done
else
while ok 330; do
  r=$((r + 1)); chk=--no-check; [ $r = 1 ] && chk=--check
  for v in def t8 t16 t24; do
    e=X=1; [ $v != def ] && e=FP4MOE_SM80_TILE=${v#t}
    ms="qwen3-30b:88,104,192,208,224,240 qwen3-235b:88,104,192,208,224,240 gpt-oss-120b:176,208,384,416,448,480"
    [ $r = 1 ] && ms="$ms deepseek-v3:176,208,384,416,448,480"
    for m in $ms; do
      ok 380 || break 3
      env $e timeout 40 .carry/bin/fp4moe bench --model ${m%%:*} --tokens ${m#*:} --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    done
  done
done
fi
echo "rounds $r t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
cd $OUT && for f in ab/*-r*.txt; do b=$(basename $f .txt); v=${b%%-*}; rest=${b#*-}; m=${rest%-r*}; \
  grep -E "^ +[0-9]+ +[0-9.]+ " $f | awk -v v=$v -v m=$m '{print m, $1, v, $2}'; done | sort | \
  awk '{k=$1" "$2" "$3; a[k]=a[k]" "$4} END{for(k in a) print k, a[k]}' | sort -k1,1 -k2,2n -k3,3
tar czf ab.tgz ab && rm -rf ab
