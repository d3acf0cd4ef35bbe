#!/usr/bin/env bash
# v57 call 6 (carry .carry/kp3: main's CLI (kpair merged), .carry/h57: branch hoist's CLI: the
# rsws consumers' loop-invariant shared addresses and B descriptor read from shared memory once).
# The session's last ~170 s of device time: a short A/B, each process's line printed as it ends.
set -u
source scripts/device_lib.sh
unxz .carry/kp3/cli.xz .carry/bin/fp4moe_main
unxz .carry/h57/cli.xz .carry/bin/fp4moe_hoist
AB_WARM_MS=1000
for r in 1 2 3; do
  for m in qwen3-235b:w4a16:512 deepseek-v3:w4a16:2048; do
    IFS=: read -r model q toks <<< "$m"
    for b in main hoist; do
      ok 150 || break 3
      ab_point $b $r $model $q $toks
      f="$OUT/ab/${model}_${q}@${toks}-$b-r$r.txt"
      echo "r$r $b $m $(grep -E "^ +$toks " "$f" | awk '{print $2}') $(grep -cE 'PASS' "$f") t=$(( $(date +%s) - start ))"
    done
  done
done
ab_report main
