#!/usr/bin/env bash
# v26 call 5: A/B of GEMM 1's epilogue (the bf16 rounding by cvt.rn.bf16x2, one row pointer per
# token): base = main (z27, f7b2f36's kernels), c4 = the change, c8 = the change with 8-column
# chunks at 128-token tiles. W4A16.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z27/fp4moe.xz .carry/bin/base; unxz .carry/z31/c4.xz .carry/bin/c4; unxz .carry/z31/c8.xz .carry/bin/c8
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # variant round
  for m in kimi-k2:1,128,2048,16384 qwen3-235b:2048,16384; do
    ok 250 || { echo "skip $*"; return; }
    timeout 90 .carry/bin/$1 bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline --no-ceilings \
      > $OUT/ab/$1-${m%%:*}-r$2.txt 2>&1
    echo "$1 ${m%%:*} r$2 rc=$? t=$(( $(date +%s) - start ))"
  done
}
run base 1; run c4 1; run c8 1; run base 2; run c4 2; run c8 2
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
