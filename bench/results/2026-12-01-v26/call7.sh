#!/usr/bin/env bash
# v26 call 7 (prepared, not run: no device time was left): the A/B of branch epi-bf16's chunking,
# main (z27, f7b2f36's kernels) | c8 (the branch, z31/c8) | c16 (kChunk 16 at 128-token tiles, a
# full unroll of GEMM 1's epilogue, z31/c16), alternated, two rounds. W4A16.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z27/fp4moe.xz .carry/bin/base; unxz .carry/z31/c8.xz .carry/bin/c8; unxz .carry/z31/c16.xz .carry/bin/c16
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
run() {  # variant round
  for m in kimi-k2:32,512,4096,16384 qwen3-235b:128,2048,8192,16384 qwen3-30b:8192,16384; do
    ok 540 || { echo "skip $*"; return; }
    timeout 90 .carry/bin/$1 bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline --no-ceilings \
      > $OUT/ab/$1-${m%%:*}-r$2.txt 2>&1
    echo "$1 ${m%%:*} r$2 rc=$? t=$(( $(date +%s) - start ))"
  done
}
run base 1; run c8 1; run c16 1; run base 2; run c8 2; run c16 2
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab
