#!/usr/bin/env bash
# Prepared in v31 for the next session (runs from main or the branch: it uses only the carried binaries; carry
# [".carry/z45"], ~560 s). The session's device time ran out before it could run.
# Branch tail-first: the split's and the width split's launches narrowest first
# (FP4MOE_SM90_TAIL_FIRST=1 / set_sm90_tail_first; the default order unchanged).
# .carry/z45: tf = its CLI, tf_tests = its test binary (sm_90a, built at 99f5f37).
# 1. the two tests that run the reversed order against the default's bits;
# 2. A/B default | TAIL_FIRST=1, one process per point, alternated, the first round with --check.
# If it wins: make the order a rule (tail_first()), then the whole suite (scripts/gpu_suite.sh).
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z45/tf.xz .carry/bin/tf
unxz .carry/z45/tf_tests.xz .carry/bin/tf_tests
timeout 60 .carry/bin/tf_tests --gtest_filter='CudaGemmSm90.WidthSplitAtEveryWidth:CudaGemmSm90.WideWidthAtEveryWidth' > $OUT/tests.log 2>&1
echo "tests rc=$? t=$(( $(date +%s) - start ))"; grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" $OUT/tests.log | head -6
r=0
while ok 470; do
  r=$((r + 1)); chk=--no-check; [ $r = 1 ] && chk=--check
  for v in def tf; do
    ok 520 || break
    e=X=1; [ $v = tf ] && e=FP4MOE_SM90_TAIL_FIRST=1
    env $e timeout 40 .carry/bin/tf bench --model qwen3-30b --tokens 256,512,1024,2048,4096 --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-q30-r$r.txt 2>&1
    ok 520 || break
    env $e timeout 40 .carry/bin/tf bench --model qwen3-235b --tokens 512,1024,2048 --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-q235-r$r.txt 2>&1
    ok 520 || break
    env $e timeout 40 .carry/bin/tf bench --model gpt-oss-120b --tokens 512,1024,2048 --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-oss-r$r.txt 2>&1
  done
done
echo "rounds $r t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt
cd $OUT && grep -H -E "^ +[0-9]+ +[0-9.]+ " ab/*-r*.txt | awk '{split($1,f,"-r"); print f[1], $2, $3}' | sed 's#ab/##' | \
  awk '{split($1,g,"-"); k=g[2]" "$2" "g[1]; a[k]=a[k]" "$3} END{for (k in a) print k, a[k]}' | sort -k1,1 -k2,2n -k3,3
tar czf ab.tgz ab && rm -rf ab
