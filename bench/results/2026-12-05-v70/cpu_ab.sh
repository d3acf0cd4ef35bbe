#!/usr/bin/env bash
# A/B of fp4moe CPU builds: alternated rounds, forward µs per (model, quant, threads, T); medians.
# usage: ab2.sh ROUNDS OUTDIR "model quant tokens" ... -- name=bin ...
set -euo pipefail
rounds=$1 out=$2; shift 2
cfgs=(); while [ "$1" != "--" ]; do cfgs+=("$1"); shift; done; shift
variants=("$@")
mkdir -p "$out"; : > "$out/rows.txt"
for r in $(seq "$rounds"); do
  for nb in "${variants[@]}"; do
    v=${nb%%=*} bin=${nb#*=}
    for cfg in "${cfgs[@]}"; do
      read -r model quant tokens <<<"$cfg"
      for th in ${THREADS:-1 2}; do
        FP4MOE_CPU_THREADS=$th "$bin" bench --model $model --quant $quant --tokens $tokens --iters ${ITERS:-5} --no-check 2>&1 |
          awk -v v=$v -v m=$model -v q=$quant -v th=$th -v r=$r '/^setup:/{for(i=1;i<=NF;i++) if($i=="prepare") p=$(i+1)} /^ +[0-9]+ +[0-9.]+ /{print r, v, m, q, th, $1, $2, p}' >> "$out/rows.txt"
      done
    done
  done
done
python3 - "$out/rows.txt" "${variants[@]}" <<'PY' | tee "$out/table.txt"
import sys, statistics as st, collections
rows = sys.argv[1]; names = [a.split('=')[0] for a in sys.argv[2:]]
d = collections.defaultdict(list)
for line in open(rows):
    r, v, m, q, th, T, us, p = line.split()
    d[(m, q, th, int(T), v)].append(float(us))
keys = sorted({k[:4] for k in d})
base = names[0]
print(f"{'model':13s} {'quant':6s} {'thr':>3s} {'T':>5s} " + " ".join(f"{n:>10s}" for n in names) + "  (us, median; ratio to " + base + ")")
for k in keys:
    b = st.median(d[k + (base,)])
    cells = [f"{b:10.0f}"] + [f"{st.median(d[k + (n,)]) / b:10.3f}" for n in names[1:]]
    print(f"{k[0]:13s} {k[1]:6s} {k[2]:>3s} {k[3]:5d} " + " ".join(cells))
PY
