#!/usr/bin/env bash
# Prepared in v30 for the next session (carry [".carry/z42/main.xz", ".carry/z43"], ~560 s):
# branch requant-fast, format.h's FP4 encoders and decoders as arithmetic without branches or
# divisions (the W4A4 requantization: the staging kernels and the fast path's epilogue).
# Binaries built on the CPU machine (sm_90a, static cudart): main = main's CLI (531729e's
# SASS); rq = requant-fast's CLI; rq_tests = its test binary.
# 1. the new GPU test (every fp32 pattern through both encoders on the GPU, against the
#    host's codes) and the format tests; then the whole test binary, EP apart, 8 shards;
# 2. --nodes of qwen3-30b W4A4 T = 16384, main and rq (the staging kernels' times);
# 3. A/B, one process per point, alternated: W4A4 qwen3-30b T = 128 / 2048 / 16384,
#    qwen3-235b T = 2048 / 16384, kimi-k2 T = 512; W4A16 qwen3-30b T = 2048 as the control.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z42/main.xz .carry/bin/main
unxz .carry/z43/rq.xz .carry/bin/rq
unxz .carry/z43/rq_tests.xz .carry/bin/fp4moe_tests
timeout 150 .carry/bin/fp4moe_tests --gtest_filter='CudaFormat.*:Format*:CudaGemmActivation.Bf16*' > $OUT/new-tests.log 2>&1
echo "new tests rc=$? t=$(( $(date +%s) - start ))"; grep -E "^\[  (PASSED|FAILED) |Failure|OK \] CudaFormat" $OUT/new-tests.log | head -8
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*:CudaFormat.*' TESTS_TIMEOUT=220 bash scripts/gpu_suite.sh tests 2>&1 | tail -10
echo "suite t=$(( $(date +%s) - start ))"
for v in main rq; do
  ok 330 || break
  timeout 45 .carry/bin/$v bench --model qwen3-30b --quant w4a4 --tokens 16384 --iters 20 --no-check --no-baseline \
    --no-ceilings --nodes > $OUT/ab/nodes-$v.txt 2>&1
  echo "nodes $v rc=$? t=$(( $(date +%s) - start ))"
done
run() {  # binary, tag, bench arguments
  local v=$1 tag=$2; shift 2
  timeout 60 .carry/bin/$v bench "$@" --iters 40 --no-check --no-baseline --no-ceilings > $OUT/ab/$v-$tag-r$r.txt 2>&1
}
r=0
while ok 480; do
  r=$((r + 1))
  for v in main rq; do
    ok 560 || break
    run $v q30a4 --model qwen3-30b --quant w4a4 --tokens 128,2048,16384
    run $v q235a4 --model qwen3-235b --quant w4a4 --tokens 2048,16384
    run $v q30a16 --model qwen3-30b --tokens 2048
    ok 500 && run $v kimia4 --model kimi-k2 --quant w4a4 --tokens 512
  done
done
echo "rounds $r t=$(( $(date +%s) - start ))"
cd $OUT && grep -H -E "^ +[0-9]+ +[0-9.]+ " ab/*-r*.txt | awk '{split($1,f,"-r"); print f[1], $2, $3}' | sort | \
  awk '{k=$1" "$2; a[k]=a[k]" "$3} END{for (k in a) print k, a[k]}' | sort
grep -E "^ +[0-9.]+  [a-z_]" ab/nodes-*.txt
tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
