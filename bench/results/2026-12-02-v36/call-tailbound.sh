#!/usr/bin/env bash
# Prepared in v35 (carry [".carry/z56"]: branch tail-bound a8de574's CLI = main 0678092 plus a
# bound switch, sm_90a; ~400 s). How much do the width split's 64-token launches cost in wall
# time? Timed alone they are a fifth of qwen3-30b T = 512's GEMM time (v31 §2: 25.1 + 14.9 µs),
# but under PDL they overlap the narrow launch's last units: at qwen3-30b T = 256 their whole
# cost was ~4 µs (v35 §3: folding them away saved that). FP4MOE_BOUND_NO_TAIL=1 skips them
# (results wrong: --no-check in every round), so the difference bounds what any way of hiding
# them (a dynamic unit counter with the tail launched first, v31 §7's lead) can gain.
# Default against no tail, alternated, at T where a width split runs (unsplit rsws4 or the split).
set -u
source scripts/device_lib.sh
unxz .carry/z56/cli.xz .carry/bin/fp4moe_def
env_variant notail .carry/bin/fp4moe_def "FP4MOE_BOUND_NO_TAIL=1"
# ab_point runs --check in round 1; the bound is wrong by design, so round 1 is skipped in the summary.
ab_rounds 380 400 "def notail" "qwen3-30b:w4a16:384,512,1024,2048 qwen3-235b:w4a16:512,1024,2048 gpt-oss-120b:w4a16:768,1024,2048 deepseek-v3:w4a16:512,2048 kimi-k2:w4a16:1024,2048"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -c PASS $OUT/ab/*def-r1.txt | tr '\n' ' '; echo
rm -f $OUT/ab/*-r1.txt
python3 scripts/ab_summary.py $OUT/ab --base def
cd $OUT && tar czf ab.tgz ab && rm -rf ab
