#!/usr/bin/env bash
# v29 call 3 (carry [".carry/z40"]): the known activation of the format's presets in GEMM 1's
# epilogue, extended. act = epi-act rebased on main (SASS = call 1's act); mx = also MXFP4's
# swiglu_oai known at the main widths; mxn = mx plus the narrow and wide launches of the width
# split (FP4MOE_EXP_NARROW=1). First mxn's whole test binary, EP apart, 8 shards; then the A/B,
# one process per preset, variant order rotated per round, while time is left.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z40/mxn_tests.xz .carry/bin/fp4moe_tests
for v in act mx mxn; do unxz .carry/z40/$v.xz .carry/bin/$v; done
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
order=(act mx mxn)
r=0
while [ $(( $(date +%s) - start )) -lt 500 ]; do
  r=$((r + 1))
  for i in 0 1 2; do
    v=${order[$(( (i + r) % 3 ))]}
    for m in gpt-oss-120b:512,2048,8192,16384 qwen3-235b:512,2048 qwen3-30b:512,2048; do
      timeout 40 .carry/bin/$v bench --model ${m%%:*} --tokens ${m#*:} --iters 40 --no-check --no-baseline \
        --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
    done
  done
  echo "round $r t=$(( $(date +%s) - start ))"
done
cd $OUT && for f in ab/*.txt; do b=$(basename $f .txt); awk -v b=$b '/^ *[0-9]+ +[0-9.]+ / {print b, $1, $2}' $f; done \
  | awk '{split($1,a,"-r"); print a[1], $2, $3}' | sort -k1,1 -k2,2n -k3,3n > ab.txt
python3 - <<'PY'
import collections, statistics
d = collections.defaultdict(list)
for l in open('ab.txt'):
    k, t, us = l.split(); d[(k.split('-', 1)[1], int(t), k.split('-', 1)[0])].append(float(us))
for (m, t, v) in sorted(d):
    x = d[(m, t, v)]; print(f"{m:14s} {t:6d} {v:4s} median {statistics.median(x):9.1f}  n={len(x)}  min {min(x):9.1f} max {max(x):9.1f}")
PY
tar czf ab.tgz ab && rm -rf ab && tar czf tests.tgz tests && rm -rf tests
