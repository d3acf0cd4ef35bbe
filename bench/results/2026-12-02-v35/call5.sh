#!/usr/bin/env bash
# v35 call 5 (carry [".carry/z54"]: the fold at kSm90FoldMaxExtraWaves = 0.2, CLI, sm_90a;
# ~230 s): the default (folds qwen3-30b T = 256's GEMMs, qwen3-235b T = 256's GEMM 1) against
# unfolded (FP4MOE_SM90_FOLD=1), alternated, W4A16 and W4A4.
set -u
source scripts/device_lib.sh
unxz .carry/z54/cli.xz .carry/bin/fp4moe_def
env_variant nofold .carry/bin/fp4moe_def "FP4MOE_SM90_FOLD=1"
ab_rounds 190 210 "def nofold" "qwen3-30b:w4a16:240,256,272 qwen3-30b:w4a4:256 qwen3-235b:w4a16:256 qwen3-235b:w4a4:256"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
python3 scripts/ab_summary.py $OUT/ab --base nofold
cd $OUT && tar czf ab.tgz ab && rm -rf ab
