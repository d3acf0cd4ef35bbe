#!/usr/bin/env bash
# v26 call 2: the rsws consumers staggered (exp-bounds build, W4A16): FP4MOE_EXP_LAG cycles that
# the odd consumer warpgroups wait before their first unit, so that their epilogues fall in the
# others' main loops (call 1: the epilogue costs 9% at kimi-k2 T = 16384, 18% at qwen3-235b).
set -u
start=$(date +%s)
Z=.carry/z29; mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # lag model tokens round
  ok 530 || { echo "skip $*"; return; }
  FP4MOE_EXP_LAG=$1 timeout 100 .carry/bin/fp4moe bench --model $2 --tokens $3 --iters 40 --no-check --no-baseline \
    --no-ceilings > $OUT/ab/l$1-$2-r$4.txt 2>&1
  echo "l$1 $2 r$4 rc=$? t=$(( $(date +%s) - start ))"
}
for r in 1 2; do
  for l in 0 1500 3000 6000; do
    run $l qwen3-235b 2048,8192,16384 $r
    run $l kimi-k2 8192,16384 $r
  done
done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
