#!/usr/bin/env bash
# Prepared in v27, for the next session: v26's bounds of the rsws kernels again, on main after
# the epilogue change (branch exp-bounds2 = main 6d8959c + v26's FP4MOE_EXP switch, CLI in
# .carry/z35, carry [".carry/z35"]). W4A16. FP4MOE_EXP 0 as main, 1 no epilogue (stores
# skipped; FP4MOE_EXP_GEMM=1 / 2: only GEMM 1's / GEMM 2's), 2 no weight decode, 3 neither.
# Only the rsws/rsws4 main widths change. ~450 s.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z35/exp.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name exp exp_gemm round
  for m in kimi-k2:4096,8192,16384 qwen3-235b:2048,16384; do
    ok 520 || { echo "skip $1 $m r$4"; return; }
    FP4MOE_EXP=$2 FP4MOE_EXP_GEMM=$3 timeout 100 .carry/bin/fp4moe bench --model ${m%%:*} --tokens ${m#*:} --iters 40 \
      --no-check --no-baseline --no-ceilings > $OUT/ab/$1-${m%%:*}-r$4.txt 2>&1
    echo "$1 ${m%%:*} r$4 rc=$? t=$(( $(date +%s) - start ))"
  done
}
for r in 1 2; do run e0 0 0 $r; run e1 1 0 $r; run e1g1 1 1 $r; run e2 2 0 $r; run e3 3 0 $r; done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
