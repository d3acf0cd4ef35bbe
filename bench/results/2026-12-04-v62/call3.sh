#!/usr/bin/env bash
# v62 call 3: the Python suite on the GPU from merged main's cp312 sm_90a wheel (.carry/py62,
# built as v59's next-pytest-gpu.sh says), the L2 read probe (bench/probes/l2_read.cu, binary in
# .carry/pr62) and ncu of the wgmma kernels' L2 traffic at two large-T points (.carry/rq16's
# CLI: requant16, whose kernels merged main runs). ~300 s.
set -u
source scripts/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/py62/*.whl || exit 1
root=$PWD
(cd "$(mktemp -d)" && PYTHONPATH=/tmp/site timeout 420 python3 -m pytest -q -p no:cacheprovider -rs --rootdir "$root" \
  "$root/tests/python" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?")
grep -E "passed|failed|SKIPPED|Error" "$OUT/pytest.log" | tail -8
echo "t=$(( $(date +%s) - start ))"
.carry/pr62/l2_read > "$OUT/l2_read.txt" 2>&1
echo "l2_read rc=$?"
unxz .carry/rq16/cli.xz .carry/bin/fp4moe
want="gpu__time_duration.sum lts__t_throughput.avg.pct_of_peak_sustained_elapsed lts__t_bytes.sum.per_second
lts__t_sectors_srcunit_tex_op_read.sum.per_second dram__bytes_read.sum.per_second
l1tex__m_xbar2l1tex_read_bytes.sum.per_second sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
sm__cycles_elapsed.avg.per_second"
have=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
metrics=""
for m in $want; do base=${m%%.*}; echo "$have" | grep -qx "$base" && metrics=$metrics${metrics:+,}$m; done
echo "metrics: $metrics"
mkdir -p "$OUT/ncu"
for point in kimi-k2@16384 qwen3-30b@8192 kimi-k2@2048; do
  ok 520 || break
  m=${point%@*} tok=${point#*@}
  timeout 150 ncu --clock-control none -k regex:sm90_ --launch-count 6 --metrics "$metrics" --csv --print-units base \
    .carry/bin/fp4moe bench --model $m --tokens $tok --iters 1 --copies 1 --warmup-ms 0 --no-check \
    --no-ceilings --no-baseline > "$OUT/ncu/$m-$tok.csv" 2> "$OUT/ncu/$m-$tok.err"
  echo "ncu $m T=$tok rc=$? t=$(( $(date +%s) - start ))"
done
python3 - "$OUT/ncu" <<'PY' | tee "$OUT/l2-breakdown.txt"
import csv, glob, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    rows = [r for r in csv.reader(l for l in open(f) if l.startswith('"'))]
    if not rows: continue
    hdr = rows[0]; ki, ni, vi, ii = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value"), hdr.index("ID")
    by = {}
    for r in rows[1:]:
        by.setdefault((r[ii], r[ki][:60]), {})[r[ni]] = r[vi].replace(",", "")
    print("==", os.path.basename(f))
    for (i, k), d in by.items():
        print(i, k, " ".join(f"{n.split('.')[0].split('__')[1][:28]}={float(v):.4g}" for n, v in sorted(d.items())))
PY
cat "$OUT/l2_read.txt"
(cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
