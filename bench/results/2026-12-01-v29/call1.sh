#!/usr/bin/env bash
# Prepared in v28, for the next session (carry [".carry/z39"], ~420 s): branch epi-act (c1ebf99:
# GEMM 1's epilogue with silu known at compile time in the NVFP4 rsws kernels' main widths) against
# main (ed21b59, the SASS of v28's tested g8). First act's whole test binary, EP apart, 8 shards;
# then the A/B, alternated, two rounds. W4A16. gpt-oss-120b (MXFP4, swiglu_oai: the runtime route
# in both) and kimi-k2 T = 32 (the fast path, unchanged) are controls.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z39/act_tests.xz .carry/bin/fp4moe_tests
for v in base act; do unxz .carry/z39/$v.xz .carry/bin/$v; done
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
run() {  # variant round models...
  local v=$1 r=$2; shift 2
  for m in "$@"; do
    ok 520 || { echo "skip $v $m r$r"; return; }
    timeout 80 .carry/bin/$v bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline --no-ceilings \
      > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    echo "$v ${m%%:*} r$r rc=$? t=$(( $(date +%s) - start ))"
  done
}
M="qwen3-235b:2048,8192,16384 qwen3-30b:2048,16384 kimi-k2:32,4096,16384 gpt-oss-120b:16384"
for v in base act; do run $v 1 $M; done
for v in act base; do run $v 2 $M; done
cd $OUT && grep -H "^ *[0-9]" ab/*.txt | awk '{print $1, $2, $3}' && tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
