#!/usr/bin/env bash
# v51: do the GEMM paths rank differently under a sustained load? kimi-k2 W4A16 T = 8 / 32 / 128,
# each process after 2 s of untimed replays (`--warmup-ms 2000`), FP4MOE_GEMM = default (sm90:
# decode / fast / wgmma by shape), decode, stream, splitk, alternated over rounds. Carry
# [".carry/r51"]; ~20 s a process. Table: scripts/ab_summary.py, base "default".
set -u
source scripts/device_lib.sh
unxz .carry/r51/cli.xz .carry/bin/fp4moe
for r in 1 2 3; do
  for v in default decode stream splitk; do
    ok ${AB_BUDGET_S:-230} || break 2
    env=""; [ $v = default ] || env="FP4MOE_GEMM=$v"
    env $env timeout 60 .carry/bin/fp4moe bench --model kimi-k2 --quant w4a16 --tokens 8,32,128 --iters 50 \
      --no-check --no-baseline --no-ceilings --warmup-ms 2000 > "$OUT/ab/kimi-k2_w4a16@8+32+128-$v-r$r.txt" 2>&1
    echo "$v r$r rc=$? t=$(( $(date +%s) - start ))"
  done
done
python3 scripts/ab_summary.py "$OUT/ab" --base default
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
