#!/usr/bin/env bash
# Prepared in v36 (carry [".carry/z60"]: branch sm90-split-files 62fc01d's CLI, sm_90a; ~330 s).
# The edges of v36's NVFP4 threshold by waves, where it was not measured:
# - many waves (deepseek-v3 31 / 54, kimi-k2 47 / 81): wgmma won at 16 rows by 2.0-3.4%. Does
#   it win below? wgmma from 13 rows (FP4MOE_SM90_MIN_ROWS=13, "low") against the default's fast
#   path at kimi-k2 T = 640 / 704 (13.3 / 14.7 rows) and deepseek-v3 T = 448 / 480 (14 / 15).
# - few waves (qwen3-30b 5.8 / 7.8, qwen3-235b 11.6 / 15.5): the fast path won at 16-18 rows on
#   qwen3-30b, at 16-17 on qwen3-235b. Past the threshold: the fast path to 21 rows
#   (FP4MOE_SM90_MIN_ROWS=22, "high") against the default's wgmma at qwen3-30b T = 304 / 320 /
#   336 (19-21 rows) and qwen3-235b T = 288 / 304 / 320 (18-20 rows).
# A variant's switch replaces the threshold at any waves, so each runs only at its own points.
# Alternated processes per round (def, then the variant); round 1 with --check.
set -u
source scripts/device_lib.sh
unxz .carry/z60/cli.xz .carry/bin/fp4moe_def
env_variant low .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=13"
env_variant high .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=22"
ab_round=0
while ok 300; do
  ab_round=$((ab_round + 1))
  for v in def low; do
    ab_point $v $ab_round kimi-k2 w4a16 640,704
    ab_point $v $ab_round deepseek-v3 w4a16 448,480
  done
  for v in def high; do
    ab_point $v $ab_round qwen3-30b w4a16 304,320,336
    ab_point $v $ab_round qwen3-235b w4a16 288,304,320
  done
done
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report def
