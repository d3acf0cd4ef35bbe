#!/usr/bin/env bash
# v32 call 1 (carry [".carry/z45"], ~480 s): the Python suite on main (built on the device, sm_90a);
# per-node times of the split at qwen3-30b T = 512 / 2048 in both orders; the tail-first A/B at
# more token counts where the split runs (rows per expert a multiple of 128 and others).
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab $OUT/nodes
FP4MOE_PYTHON_CUDA=1 FP4MOE_CUDA_ARCHS=90a timeout 200 bash scripts/test_python.sh -q > $OUT/pytest.log 2>&1
echo "python rc=$? t=$(( $(date +%s) - start ))"; grep -E "passed|failed" $OUT/pytest.log | tail -2
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z45/tf.xz .carry/bin/tf && chmod +x .carry/bin/tf
for v in def tf; do
  e=X=1; [ $v = tf ] && e=FP4MOE_SM90_TAIL_FIRST=1
  env $e timeout 40 .carry/bin/tf bench --model qwen3-30b --tokens 512,2048 --iters 20 --no-check --no-baseline --no-ceilings --nodes > $OUT/nodes/$v.txt 2>&1
done
echo "nodes t=$(( $(date +%s) - start ))"
r=0
while ok 440; do
  r=$((r + 1)); chk=--no-check; [ $r = 1 ] && chk=--check
  for v in def tf; do
    e=X=1; [ $v = tf ] && e=FP4MOE_SM90_TAIL_FIRST=1
    for m in qwen3-30b:8192,16384 qwen3-235b:4096,8192 deepseek-v3:2048,4096 kimi-k2:2048,4096 gpt-oss-120b:4096; do
      ok 470 || break 2
      env $e timeout 40 .carry/bin/tf bench --model ${m%%:*} --tokens ${m#*:} --iters 30 $chk --no-baseline --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    done
  done
done
echo "rounds $r t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt
cd $OUT && grep -H -E "^ +[0-9]+ +[0-9.]+ " ab/*-r*.txt | sed 's#ab/##; s#-r[0-9]*\.txt:# #' | \
  awk '{split($1,g,"-"); m=substr($1, length(g[1])+2); k=m" "$2" "g[1]; a[k]=a[k]" "$3} END{for (k in a) print k, a[k]}' | sort -k1,1 -k2,2n -k3,3
tar czf all.tgz ab nodes pytest.log && rm -rf ab nodes
