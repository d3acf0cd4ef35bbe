#!/usr/bin/env bash
# v52 call 5 (carry [".carry/r51c", ".carry/lf52"]: main c2c3006's CLI and branch ldfull's;
# timeout_s 250, ~150 s). Branch ldfull: the fast path's groups inside K (K a whole number of
# k-blocks) load without a test per stage (SASS: the 8-token GEMM 1 loop 21.1 -> 18.4
# instructions per weight word). Alternated per point (main, then ldfull, per spec and round),
# after 2 s of replays; --check in round 1, which also checks W4A4 (A_FP4) and gpt-oss-120b
# (K = 2880: the groups' tail and MXFP4).
set -u
source scripts/device_lib.sh
unxz .carry/r51c/cli.xz .carry/bin/fp4moe_m
unxz .carry/lf52/cli.xz .carry/bin/fp4moe_l
env_variant main .carry/bin/fp4moe_m ""
env_variant ldfull .carry/bin/fp4moe_l ""
clocks_start 200
for m in kimi-k2:w4a16:8,32 qwen3-30b:w4a4:32,128 gpt-oss-120b:w4a16:32 qwen3-235b:w4a16:32,128; do
  IFS=: read -r model q toks <<< "$m"
  for b in main ldfull; do ab_point $b 1 "$model" "$q" "$toks"; done
done
r=1
while ok ${ROUND_S:-110}; do
  r=$((r + 1))
  for m in kimi-k2:w4a16:8,32 qwen3-235b:w4a16:32,128; do
    IFS=: read -r model q toks <<< "$m"
    for b in main ldfull; do ok ${POINT_S:-140} && ab_point $b $r "$model" "$q" "$toks"; done
  done
done
clocks_stop
echo "rounds $r t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
