#!/usr/bin/env bash
# v31 call 4 (main fa80bff, .carry/z44): the split and width-split rules on today's kernels, by
# their A/B switches: default | FP4MOE_SM90_WIDTHS=0 (no narrow/wide widths) |
# FP4MOE_SM90_SPLIT_WAVES=1000 (no split) | FP4MOE_SM90_PDL=0 (the split's launches not
# programmatic dependents). W4A16, one process per point, alternated, as the time allows.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z44/main.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
run() {  # tag, env..., then bench args after --
  local tag=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 60 .carry/bin/fp4moe bench "$@" --iters 40 --no-check --no-baseline --no-ceilings > $OUT/ab/$tag-r$r.txt 2>&1
}
r=0
while ok 430; do
  r=$((r + 1))
  for v in def widths0 split0 pdl0; do
    ok 470 || break
    case $v in def) e=X=1;; widths0) e=FP4MOE_SM90_WIDTHS=0;; split0) e=FP4MOE_SM90_SPLIT_WAVES=1000;; pdl0) e=FP4MOE_SM90_PDL=0;; esac
    run $v-q30 $e -- --model qwen3-30b --tokens 256,512,1024,2048,4096,16384
    run $v-q235 $e -- --model qwen3-235b --tokens 512,1024,2048,4096
    run $v-oss $e -- --model gpt-oss-120b --tokens 512,1024,2048
  done
done
echo "rounds $r t=$(( $(date +%s) - start ))"
cd $OUT && grep -H -E "^ +[0-9]+ +[0-9.]+ " ab/*-r*.txt | awk '{split($1,f,"-r"); print f[1], $2, $3}' | sed 's#ab/##' | \
  awk '{split($1,g,"-"); k=g[2]" "$2" "g[1]; a[k]=a[k]" "$3} END{for (k in a) print k, a[k]}' | sort -k1,1 -k2,2n -k3,3
tar czf ab.tgz ab && rm -rf ab
