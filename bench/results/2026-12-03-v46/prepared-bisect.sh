#!/usr/bin/env bash
# Prepared for the next session (~480 s with start-up): where main lost its T = 512 / 2048 speed
# since v35 (v46 §4: d50d413 against 19a7664, 5 alternated rounds: qwen3-30b T = 512 / 2048
# 190.6 / 411.6 against 210.3 / 433.3 µs, qwen3-235b T = 512 580.7 against 611.8, gpt-oss-120b
# T = 2048 967.4 against 1,001.0; kimi-k2 T = 512 3,132.4 against 3,086.6).
# The CLIs of one commit per stretch of sessions, oldest first:
#   d50d413 v35 (the full table's code)      fe04fb5 v36-v37 (thresholds by waves, three files)
#   d2f1719 v38-v41 (decode split, one-kernel layer)   467b4cd v42-v43 (the slot search)
#   86c5f84 v44 (fast path as dependents, decode edge) main   v45 (the producers' fence)
# Build them here first: bash bench/results/2026-12-03-v46/build-bisect.sh (~25 min on 2 cores);
# carry the six .carry/b-* folders (~58 MB).
set -u
source scripts/device_lib.sh
vs=""
for c in d50d413 fe04fb5 d2f1719 467b4cd 86c5f84 main; do
  unxz .carry/b-$c/cli.xz .carry/bin/fp4moe_$c && vs="$vs $c"
done
# One spec per model: the outputs are named by model.
ab_rounds ${ROUND_S:-330} ${POINT_S:-380} "$vs" \
  "qwen3-30b:w4a16:512,2048 qwen3-235b:w4a16:512 gpt-oss-120b:w4a16:2048"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report d50d413 | tee $OUT/ab-report.txt
