#!/usr/bin/env bash
# v67 call 3 (carry [".carry/mn67"], main 59472f6's CLI): how much of the fast path's kernels the
# SMs sit idle (their start and last wave), the question under TRIED's lead "GEMM 2 of the fast
# path started per expert". ncu of the two sm80_grouped_gemm launches of one forward at
# qwen3-30b T = 32 / 128, qwen3-235b T = 32, kimi-k2 T = 32 (W4A16): time, DRAM share, SM cycles
# active against elapsed (the idle share), waves per SM, warps active, the clock. ~120 s.
set -u
source scripts/device_lib.sh
unxz .carry/mn67/cli.xz .carry/bin/fp4moe || exit 1
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg
metrics=$metrics,sm__cycles_elapsed.avg,launch__waves_per_multiprocessor,launch__grid_size
metrics=$metrics,sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second
metrics=$metrics,dram__bytes_read.sum,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
mkdir -p "$OUT/ncu"
for p in qwen3-30b:32 qwen3-30b:128 qwen3-235b:32 kimi-k2:32; do
  m=${p%%:*} t=${p##*:}
  timeout 90 ncu --clock-control none -k regex:sm80_grouped_gemm --launch-count 2 --metrics "$metrics" --csv \
    --print-units base .carry/bin/fp4moe bench --model "$m" --tokens "$t" --iters 1 --copies 1 --warmup-ms 0 \
    --no-check --no-ceilings --no-baseline > "$OUT/ncu/$m-$t.csv" 2> "$OUT/ncu/$m-$t.err"
  echo "== $m T=$t rc=$?"
  python3 - "$OUT/ncu/$m-$t.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit(print("no rows"))
h = rows[0]; ki, mi, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
ids = h.index("ID")
by = {}
for r in rows[1:]:
    by.setdefault(r[ids], {"k": r[ki]})[r[mi]] = r[vi]
for i, d in by.items():
    f = lambda n: float(d.get(n, "nan").replace(",", ""))
    act = f("sm__cycles_active.avg") / f("sm__cycles_elapsed.avg")
    print(f"{d['k'][:40]:40s} {f('gpu__time_duration.sum')/1e3:8.1f} us  DRAM {f('dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%"
          f"  {f('dram__bytes_read.sum')/1e6:7.1f} MB  SM active {100*act:5.1f}%  waves {f('launch__waves_per_multiprocessor'):5.2f}"
          f"  grid {f('launch__grid_size'):.0f}  warps {f('sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f}%"
          f"  {f('sm__cycles_elapsed.avg.per_second')/1e6:6.0f} MHz")
PY
done
(cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
echo "t=$(( $(date +%s) - start ))"
