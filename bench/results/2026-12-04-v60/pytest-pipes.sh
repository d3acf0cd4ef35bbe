#!/usr/bin/env bash
# v60 call 4: the Python suite on the GPU from main's cp312 sm_90a wheel (.carry/py60, as
# v59's next-pytest-gpu.sh), then ncu pipe utilization of rsws4's GEMM 1 on main (.carry/rc60:
# ring, merged): kimi-k2 T = 2048's 48-token launch and qwen3-235b T = 512's first rsws launch.
# Which pipe the consumers' decode fills (ALU: PRMT / LOP3 / SHF at 16 lanes a cycle) against
# the tensor pipe: the lead for the next decode change.
set -u
source scripts/device_lib.sh
bash bench/results/2026-12-04-v59/next-pytest-gpu.sh
unxz .carry/rc60/cli.xz .carry/bin/fp4moe
for spec in kimi-k2:2048:1 qwen3-235b:512:0; do
  IFS=: read -r m t skip <<< "$spec"
  rep=$OUT/pipes-$m-$t
  timeout 100 ncu --clock-control none -k regex:sm90_rsws_gemm --launch-skip $skip --launch-count 1 \
    --metrics 'regex:^sm__(inst_executed_pipe_[a-z_]+|pipe_[a-z_]+_cycles_active)\.avg\.pct_of_peak_sustained_active$',gpu__time_duration.sum,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv --page raw .carry/bin/fp4moe bench --model $m --tokens $t --iters 1 --warmup 0 --sets 1 --no-check \
    --no-ceilings --no-baseline > $rep.csv 2> $rep.err
  echo "$m $t rc=$?"; tail -2 $rep.err
  python3 - "$rep.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
if hdr is None:
    print("no table"); print("".join(open(sys.argv[1]).readlines()[-5:])); sys.exit()
names, vals = rows[hdr], rows[hdr + 2]
for n, v in sorted(zip(names, vals)):
    if n.startswith(("sm__", "gpu__", "smsp__", "Kernel")) and v not in ("", "0"):
        try:
            if float(v.replace(",", "")) < 0.5: continue
        except ValueError: pass
        print(f"  {n} = {v}")
PY
done
echo "t=$(( $(date +%s) - start ))"
