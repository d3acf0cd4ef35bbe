#!/usr/bin/env bash
# v26 call 1: bounds of the rsws kernels at prefill (exp-bounds build, W4A16): FP4MOE_EXP
# 0 as main, 1 no epilogue (stores skipped), 2 no weight decode (raw words as A), 4 no wgmma,
# 3 neither epilogue nor decode. Only the rsws/rsws4 main widths change; narrow/wide launches stay.
set -u
start=$(date +%s)
Z=.carry/z28; mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # variant model tokens round
  ok 520 || { echo "skip $*"; return; }
  FP4MOE_EXP=$1 timeout 100 .carry/bin/fp4moe bench --model $2 --tokens $3 --iters 40 --no-check --no-baseline \
    --no-ceilings > $OUT/ab/e$1-$2-r$4.txt 2>&1
  echo "e$1 $2 r$4 rc=$? t=$(( $(date +%s) - start ))"
}
for r in 1 2; do
  for e in 0 1 2 4 3; do
    run $e kimi-k2 2048,8192,16384 $r
    run $e qwen3-235b 2048,16384 $r
  done
done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | head -100
