#!/usr/bin/env bash
# v50 call 3 (carry [".carry/r50b", ".carry/r50/tests.xz"]; timeout_s 600): the bench's new
# --layers N (layer calls per timed CUDA graph, µs per call). Its ctest script on the GPU, then
# per preset one bench process at --layers 1 and one at --layers 8, alternated, T = 1 / 8 / 32
# / 128, W4A16, 30 replays, ceilings measured in each process; then main's whole test binary
# (74546f2: route-group merged), EP apart, in 8 shards, while the time lasts.
set -u
source scripts/device_lib.sh
unxz .carry/r50b/cli.xz .carry/bin/fp4moe
unxz .carry/r50/tests.xz .carry/bin/fp4moe_tests
cmake -DBIN=.carry/bin/fp4moe -DJSON=$OUT/layers-check.json -P cmake/check_bench_layers.cmake > $OUT/layers-check.txt 2>&1
echo "CliBenchLayers script rc=$? $(tail -1 $OUT/layers-check.txt)"
mkdir -p $OUT/layers
for m in qwen3-30b gpt-oss-120b qwen3-235b deepseek-v3 kimi-k2; do
  for n in 1 8; do
    ok 330 || break 2
    timeout 120 .carry/bin/fp4moe bench --model $m --tokens 1,8,32,128 --iters 30 --warmup 5 --no-check --no-baseline \
      --layers $n --json $OUT/layers/$m-L$n.json > $OUT/layers/$m-L$n.txt 2>&1
    echo "$m --layers $n rc=$? t=$(( $(date +%s) - start ))"
  done
done
python3 - "$OUT/layers" <<'PY' | tee $OUT/layers-summary.txt
import glob, json, os, sys
d = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.json'))):
    j = json.load(open(f))
    for r in j['runs']:
        n = r.get('layers_per_graph')
        for row in r.get('rows', []):
            d.setdefault((r['preset'], row['tokens']), {})[n] = (row['forward_us_median'], row.get('floor_us'))
print('preset T  us per call: 1 / 8 per graph  (change)  floor/time: 1 / 8')
for (m, t), v in sorted(d.items(), key=lambda x: (x[0][0], x[0][1])):
    if 1 in v and 8 in v:
        a, fa = v[1]; b, fb = v[8]
        ff = lambda us, fl: f'{100 * fl / us:.0f}%' if fl else 'n/a'
        print(f'{m} {t}  {a:.1f} / {b:.1f}  ({100 * (b / a - 1):+.1f}%)  {ff(a, fa)} / {ff(b, fb)}')
PY
if ok 420; then suite_shards; fi
tar czf $OUT/layers.tgz -C $OUT layers && rm -rf $OUT/layers
echo "done t=$(( $(date +%s) - start ))"
