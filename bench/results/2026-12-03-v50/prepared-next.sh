#!/usr/bin/env bash
# Prepared in v50 (carry [".carry/r50c"]: main 2daa5eb's CLI, whose code is main 137694f's;
# timeout_s 600, ~450 s). The rows the README counts as met, under a sustained load: per preset
# and quantization one process at the default timing and one after `--warmup-ms 3000`, alternated,
# T = 8 / 32 / 128, 50 samples, ceilings measured in each process; the SM clock logged every
# 50 ms. v50 §3 found kimi-k2 / deepseek-v3 T = 32-128 4-15% slower once the power cap's clock
# step falls. .carry/r50c missing? Build main's CLI (`ninja -C build-carry -j2 fp4moe_cli`,
# sm_90a Release), `strip -o` it and `xz -T2 -6` it into .carry/r50c/cli.xz.
set -u
source scripts/device_lib.sh
unxz .carry/r50c/cli.xz .carry/bin/fp4moe
clocks_start 50
mkdir -p $OUT/sus
for spec in kimi-k2:w4a16 deepseek-v3:w4a16 gpt-oss-120b:w4a16 qwen3-235b:w4a16 kimi-k2:w4a4 deepseek-v3:w4a4; do
  m=${spec%%:*}; q=${spec##*:}
  for w in 0 3000; do
    ok 520 || break 2
    mark start $m $q warm$w
    timeout 150 .carry/bin/fp4moe bench --model $m --quant $q --tokens 8,32,128 --iters 50 --no-check --no-baseline \
      --warmup-ms $w --json $OUT/sus/$m-$q-warm$w.json > $OUT/sus/$m-$q-warm$w.txt 2>&1
    echo "$m $q warm$w rc=$? t=$(( $(date +%s) - start ))"
  done
done
clocks_stop
python3 - "$OUT/sus" <<'PY' | tee $OUT/sustained-summary.txt
import glob, json, os, sys
d = {}
for f in glob.glob(os.path.join(sys.argv[1], '*.json')):
    for r in json.load(open(f))['runs']:
        for row in r.get('rows', []):
            d.setdefault((r['preset'], r['quant'], row['tokens']), {})[r.get('warmup_ms')] = row
print('preset quant T  us default / sustained  floor/time default / sustained')
for (m, q, t), v in sorted(d.items()):
    if 0 in v and 3000 in v:
        a, b = v[0], v[3000]
        f = lambda r: f"{100 * r['floor_fraction']:.0f}%" if r.get('floor_fraction') else 'n/a'
        print(f"{m} {q} {t}  {a['forward_us_median']:.1f} / {b['forward_us_median']:.1f}  {f(a)} / {f(b)}")
PY
tar czf $OUT/sus.tgz -C $OUT sus && rm -rf $OUT/sus
echo "done t=$(( $(date +%s) - start ))"
