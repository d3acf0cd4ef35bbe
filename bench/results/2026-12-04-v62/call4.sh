#!/usr/bin/env bash
# v62 call 4: does the L2 feed a 256-token tile's B? Branch bdup (probe only, not merged): rsws
# (128-token tiles, kCw 2) with one stage fewer (bd1) and with that stage as the sink of a
# duplicate B copy per k-block (bd2: another k-block of the same rows, never read), i.e. the B
# bytes per flop of a 256-token tile over 128 weight rows at today's MMA and decode. Main's CLI:
# .carry/rq16 (requant16, the kernels merged main runs). A/B at three 128-token-tile points
# (W4A16), --check in round 1, then ncu of bd2's L2 traffic at kimi-k2 T = 16384. ~420 s.
set -u
source scripts/device_lib.sh
unxz .carry/rq16/cli.xz .carry/bin/fp4moe_main
unxz .carry/bd1/cli.xz .carry/bin/fp4moe_bd1
unxz .carry/bd2/cli.xz .carry/bin/fp4moe_bd2
ab_rounds_by_point 250 330 "main bd1 bd2" "kimi-k2:w4a16:16384 qwen3-235b:w4a16:16384 qwen3-30b:w4a16:8192"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
mkdir -p "$OUT/ncu"
for v in main bd2; do
  ok 480 || break
  timeout 60 ncu --clock-control none -k regex:sm90_rsws --launch-count 4 \
    --metrics gpu__time_duration.sum,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,dram__bytes_read.sum.per_second \
    --csv --print-units base .carry/bin/fp4moe_$v bench --model kimi-k2 --tokens 16384 --iters 1 --copies 1 \
    --warmup-ms 0 --no-check --no-ceilings --no-baseline > "$OUT/ncu/$v.csv" 2> "$OUT/ncu/$v.err"
  echo "ncu $v rc=$?"
  grep -h '^"' "$OUT/ncu/$v.csv" | awk -F'","' 'NR>1{print $1, substr($5,1,50), $(NF-2), $NF}' | tr -d '"'
done
(cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
