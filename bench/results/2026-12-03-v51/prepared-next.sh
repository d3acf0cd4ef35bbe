#!/usr/bin/env bash
# Prepared in v51 (carry [".carry/r51c"]: main c2c3006's CLI, sm_90a, stripped; timeout_s 600,
# ~480 s). The energy lead (TRIED): under the power cap, do the decode kernels, whose weights go
# straight to registers, beat the fast path's tiles (cp.async into shared memory, then loads) at
# T = 8-128? On a rested GPU the decode kernel unsplit was 2-5% slower (gemm_decode.cu).
# Variants: "main" (the rule) and "dec" (FP4MOE_DECODE_EDGE=0 FP4MOE_DECODE_EDGE2=0: the decode
# kernels, K split, wherever <= 8 rows per active expert). Each token count after 2 s of replays
# (ab_point's AB_WARM_MS default); --check in round 1 (edge 0 has not run on a GPU). Alternated
# processes, rounds until ~430 s. .carry/r51c missing? `ninja -C build-carry -j2 fp4moe_cli` on
# c2c3006 or later (sm_90a Release), `strip -o`, `xz -T2 -6` into .carry/r51c/cli.xz.
set -u
source scripts/device_lib.sh
unxz .carry/r51c/cli.xz .carry/bin/fp4moe
env_variant main .carry/bin/fp4moe ""
env_variant dec .carry/bin/fp4moe "FP4MOE_DECODE_EDGE=0 FP4MOE_DECODE_EDGE2=0 FP4MOE_LOG=1"
clocks_start 200
ab_rounds ${ROUND_S:-380} ${POINT_S:-430} "main dec" \
  "kimi-k2:w4a16:8,32,128 qwen3-235b:w4a16:8,32,128 gpt-oss-120b:w4a16:8,32,128 qwen3-30b:w4a16:8,32,128"
clocks_stop
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
grep -h "decode" $OUT/ab/*-dec-r1.txt | sort -u | head -8
ab_report main | tee $OUT/ab-report.txt
