#!/usr/bin/env bash
# v28 call 3 (carry [".carry/z37"]): GEMM 1's epilogue in column groups (branch epi-group).
# base = main 6c748b9; gN = the branch with FP4MOE_EPI_GROUP N (8 as committed). First the whole
# test binary of g8, EP apart, in 8 shards; then the A/B, alternated, two rounds. W4A16.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z37/g8_tests.xz .carry/bin/fp4moe_tests
for v in base g4 g8 g16; do unxz .carry/z37/$v.xz .carry/bin/$v; done
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
run() {  # variant round models...
  local v=$1 r=$2; shift 2
  for m in "$@"; do
    ok 545 || { echo "skip $v $m r$r"; return; }
    timeout 80 .carry/bin/$v bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline --no-ceilings \
      > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    echo "$v ${m%%:*} r$r rc=$? t=$(( $(date +%s) - start ))"
  done
}
Q="qwen3-30b:1,16384 qwen3-235b:128,2048,16384"
for v in base g8 g4 g16; do run $v 1 $Q kimi-k2:32,16384; done
for v in g16 g4 g8 base; do run $v 2 $Q; done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
