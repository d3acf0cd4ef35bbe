#!/usr/bin/env bash
# v26 call 3: where call 1's epilogue cost sits (exp-bounds build, W4A16): no epilogue in GEMM 1
# only (e1g1) or GEMM 2 only (e1g2), and GEMM 2's epilogue as one 16-byte store per token and
# lane into a permuted y (e8g2, timing only: the combine reads it unpermuted).
set -u
start=$(date +%s)
Z=.carry/z30; mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name exp gemm model tokens
  ok 330 || { echo "skip $*"; return; }
  FP4MOE_EXP=$2 FP4MOE_EXP_GEMM=$3 timeout 100 .carry/bin/fp4moe bench --model $4 --tokens $5 --iters 40 --no-check \
    --no-baseline --no-ceilings > $OUT/ab/$1-$4.txt 2>&1
  echo "$1 $4 rc=$? t=$(( $(date +%s) - start ))"
}
for v in base:0:0 e1g1:1:1 e1g2:1:2 e8g2:8:2 base2:0:0; do
  IFS=: read name e g <<< "$v"
  run $name $e $g qwen3-235b 2048,8192,16384
  run $name $e $g kimi-k2 8192,16384
done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
