#!/usr/bin/env bash
# v28 call 2: v26's bounds of the rsws kernels again, on main's kernels after v27's epilogue change
# (branch exp-bounds2 = main 6d8959c + the FP4MOE_EXP switch; CLI in .carry/z35, carry [".carry/z35"]).
# W4A16. FP4MOE_EXP 0 as main, 1 no epilogue (FP4MOE_EXP_GEMM=1 / 2: only GEMM 1's / GEMM 2's),
# 2 no weight decode, 3 neither. Round 1 all models, round 2 (reversed) the qwen3 models; then the
# graph's nodes timed in place (--nodes) at T = 16384, for the combine's share.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/ab
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z35/exp.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # name exp exp_gemm round models...
  local v=$1 x=$2 xg=$3 r=$4; shift 4
  for m in "$@"; do
    ok 470 || { echo "skip $v $m r$r"; return; }
    FP4MOE_EXP=$x FP4MOE_EXP_GEMM=$xg timeout 100 .carry/bin/fp4moe bench --model ${m%%:*} --tokens ${m#*:} --iters 40 \
      --no-check --no-baseline --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    echo "$v ${m%%:*} r$r rc=$? t=$(( $(date +%s) - start ))"
  done
}
ALL="kimi-k2:4096,16384 qwen3-235b:2048,16384 qwen3-30b:16384"
Q="qwen3-235b:2048,16384 qwen3-30b:16384"
run e0 0 0 1 $ALL; run e1 1 0 1 $ALL; run e1g1 1 1 1 $ALL; run e2 2 0 1 $ALL; run e3 3 0 1 $ALL
run e3 3 0 2 $Q; run e2 2 0 2 $Q; run e1g1 1 1 2 $Q; run e1 1 0 2 $Q; run e0 0 0 2 $Q
for m in qwen3-30b qwen3-235b; do
  ok 520 || break
  timeout 60 .carry/bin/fp4moe bench --model $m --tokens 16384 --iters 20 --no-check --no-baseline --no-ceilings --nodes \
    > $OUT/ab/nodes-$m.txt 2>&1; echo "nodes $m rc=$? t=$(( $(date +%s) - start ))"
done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
