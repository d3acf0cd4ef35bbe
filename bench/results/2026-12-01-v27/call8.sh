#!/usr/bin/env bash
# v27 call 8: the whole test binary, EP apart, in 8 shards, on `full` (GEMM 1's epilogue with every
# column unrolled at every width up to 16: main 41da9e1 plus kChunk = NT); then the A/B
# base (z27, 696fd4f's kernels) | m16 (main 41da9e1) | full, alternated, two rounds. W4A16.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z33/full_tests.xz .carry/bin/fp4moe_tests
unxz .carry/z27/fp4moe.xz .carry/bin/base; unxz .carry/z33/m16.xz .carry/bin/m16; unxz .carry/z33/full.xz .carry/bin/full
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
run() {  # variant round models...
  local v=$1 r=$2; shift 2
  for m in "$@"; do
    ok 560 || { echo "skip $v $m r$r"; return; }
    timeout 90 .carry/bin/$v bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline --no-ceilings \
      > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    echo "$v ${m%%:*} r$r rc=$? t=$(( $(date +%s) - start ))"
  done
}
BIG="kimi-k2:4096,16384 qwen3-235b:2048,8192,16384 qwen3-30b:16384"
SMALL="kimi-k2:32 qwen3-235b:128"
for r in 1 2; do run m16 $r $BIG $SMALL; run full $r $BIG; run base $r $SMALL; done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
