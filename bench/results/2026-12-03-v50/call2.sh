#!/usr/bin/env bash
# v50 call 2 (carry [".carry/r49/cli.xz", ".carry/r50"]; ~250 s): branch route-group, whose
# group_score carries each scan's best value in a register (no load that waits on the step
# before). The routing test three times (fresh seeds), memcheck and racecheck of it; then
# `route us` of main's CLI (.carry/r49, 72c59d5's library) against the branch's, alternated,
# 5 rounds, on deepseek-v3 (8 groups of 32, the preset that scores groups) and kimi-k2 /
# qwen3-30b (one group / softmax: group_score not run, must not move).
set -u
source scripts/device_lib.sh
unxz .carry/r49/cli.xz .carry/bin/fp4moe_main
unxz .carry/r50/cli.xz .carry/bin/fp4moe_new
unxz .carry/r50/tests.xz .carry/bin/fp4moe_tests
for i in 1 2 3; do
  .carry/bin/fp4moe_tests --gtest_filter='CudaRouting.*:CudaQuantize.*' > $OUT/routing-$i.txt 2>&1
  echo "routing run $i rc=$? $(grep -c '^\[       OK' $OUT/routing-$i.txt) ok, $(grep -E '^\[  (PASSED|FAILED)' $OUT/routing-$i.txt | tr '\n' ' ')"
done
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 .carry/bin/fp4moe_tests \
    --gtest_filter='CudaRouting.*' > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.txt | tr '\n' ' ')"
done
mkdir -p $OUT/route
for r in 1 2 3 4 5; do
  ok 230 || break
  for v in main new; do
    for m in deepseek-v3 kimi-k2 qwen3-30b; do
      timeout 60 .carry/bin/fp4moe_$v bench --model $m --tokens 1,16384 --iters 50 --warmup 5 --no-baseline \
        --no-ceilings > $OUT/route/$m-$v-r$r.txt 2>&1
    done
  done
done
python3 - "$OUT/route" <<'PY' | tee $OUT/route-summary.txt
import glob, os, re, statistics, sys
d = {}
for f in glob.glob(os.path.join(sys.argv[1], '*.txt')):
    m, v, r = re.match(r'(.+)-(main|new)-r(\d+)\.txt', os.path.basename(f)).groups()
    for line in open(f):
        x = line.split()
        if len(x) > 3 and x[0] in ('1', '16384') and re.match(r'^[0-9.]+$', x[1]):
            d.setdefault((m, x[0], v), []).append((float(x[1]), float(x[2])))
print('model T  route us main / new (median, rounds)  change  | forward us main / new')
for (m, t) in sorted({(k[0], k[1]) for k in d}):
    a, b = d.get((m, t, 'main'), []), d.get((m, t, 'new'), [])
    if not a or not b: continue
    ra, rb = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
    fa, fb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
    print(f'{m} {t}  {ra:.1f} / {rb:.1f} ({len(a)}, {len(b)})  {100*(rb/ra-1):+.1f}%  | {fa:.1f} / {fb:.1f}')
PY
tar czf $OUT/route.tgz -C $OUT route && rm -rf $OUT/route
echo "done t=$(( $(date +%s) - start ))"
