#!/usr/bin/env bash
# v57 call 7, run as an inline command (the same carry as call 6) in the session's last ~70 s of
# device time; its per-process files did not come back (a '@' in their names), so its stdout is
# call7/stdout.txt.
set -u; source scripts/device_lib.sh; unxz .carry/kp3/cli.xz .carry/bin/fp4moe_main; unxz .carry/h57/cli.xz .carry/bin/fp4moe_hoist; AB_WARM_MS=1000; for r in 1 2; do for m in qwen3-30b:w4a16:512 kimi-k2:w4a4:1024 qwen3-235b:w4a16:8192; do IFS=: read -r model q toks <<< "$m"; for b in main hoist; do ok 62 || break 3; ab_point $b $r $model $q $toks; f="$OUT/ab/${model}_${q}@${toks}-$b-r$r.txt"; echo "r$r $b $m $(grep -E "^ +$toks " "$f" | awk '{print $2}') $(grep -cE 'PASS' "$f") t=$(( $(date +%s) - start ))"; done; done; done
