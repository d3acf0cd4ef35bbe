#!/usr/bin/env bash
# Prepared in v34 (carry [".carry/z52"]: main 70f06ab's CLI, sm_90a; ~420 s). Two questions
# v34 §4 left:
# 1. NVFP4 at exactly 16 rows per expert: the fast path won on qwen3-30b / qwen3-235b (-6.3 /
#    -1.9%) and lost on deepseek-v3 / kimi-k2 (+1.5 / +2.8%). Which GEMM? Per-node times
#    (--nodes) of wgmma (default) against the fast path (FP4MOE_SM90_MIN_ROWS=25) at qwen3-30b /
#    qwen3-235b T = 256, deepseek-v3 T = 512, kimi-k2 T = 768. If GEMM 2 (K = I: 768 / 1536 /
#    2048) and GEMM 1 differ in sign, a rule by K (or by N x K) follows.
# 2. MXFP4 now runs the fast path to 21 rows, where the token tile's 24 -> 32 step (8% spill,
#    v21's, never re-measured since v24 / v25) picks 32 from 19 rows. gpt-oss-120b T = 576 / 608
#    / 640 / 672 (18-21 rows; Poisson spill past 24: 7 / 11 / 16 / 22%): default against
#    FP4MOE_SM80_TILE=24 and =32, alternated.
set -u
source scripts/device_lib.sh
unxz .carry/z52/cli.xz .carry/bin/fp4moe_def
env_variant fast .carry/bin/fp4moe_def "FP4MOE_SM90_MIN_ROWS=25 FP4MOE_SM90_MIN_ROWS_MX=25"
env_variant t24 .carry/bin/fp4moe_def "FP4MOE_SM80_TILE=24"
env_variant t32 .carry/bin/fp4moe_def "FP4MOE_SM80_TILE=32"
mkdir -p $OUT/nodes
for r in 1 2; do
  for spec in qwen3-30b:256 qwen3-235b:256 deepseek-v3:512 kimi-k2:768; do
    [ $r = 2 ] && [ ${spec%%:*} = kimi-k2 ] && continue
    for b in def fast; do
      ok 200 || break 3
      timeout 60 .carry/bin/fp4moe_$b bench --model ${spec%%:*} --tokens ${spec#*:} --iters 40 --no-check --no-baseline \
        --no-ceilings --nodes > $OUT/nodes/${spec%%:*}-$b-r$r.txt 2>&1
    done
  done
done
echo "nodes t=$(( $(date +%s) - start ))"
ab_rounds 360 390 "def t24 t32" "gpt-oss-120b:w4a16:576,608,640,672"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
python3 scripts/ab_summary.py $OUT/ab --base def
for f in $OUT/nodes/*-r1.txt; do echo "== $(basename $f)"; grep -iE "gemm|permute|combine|route|quant" $f | head -12; done
cd $OUT && tar czf rows.tgz ab nodes && rm -rf ab nodes
