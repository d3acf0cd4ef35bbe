#!/usr/bin/env bash
# Prepared in v58 for the next session (branch bounds, notes v58 §4): what rsws4's weight decode
# and its MMAs cost apart at the points where rsws4 runs. Carries .carry/hc58/cli.xz (main's
# CLI) and .carry/bd59/cli.xz (branch bounds' CLI, a timing-only build: cmake
# -DCMAKE_CUDA_FLAGS=-DFP4MOE_RSWS4_BOUNDS). Variants: main; b0, the bounds CLI as built (its
# kernels are main's: a check of the build); b1, rsws4 without the decode (FP4MOE_SM90_BOUND=1);
# b2, without the wgmma (=2). b1 / b2 compute wrong results: their round-1 --check FAILs by
# design (main's and b0's must PASS). Point-major rounds, ~520 s.
# Reading: if b1 + b2 - main is near b0 (the layer's time is decode + MMA), the two do not
# overlap and their overlap is the lever; if main is near max(b1, b2), they overlap and the
# larger one is.
set -u
source scripts/device_lib.sh
unxz .carry/hc58/cli.xz .carry/bin/fp4moe_main
unxz .carry/bd59/cli.xz .carry/bin/fp4moe_bounds_bin
env_variant b0 .carry/bin/fp4moe_bounds_bin "FP4MOE_SM90_BOUND=0"
env_variant b1 .carry/bin/fp4moe_bounds_bin "FP4MOE_SM90_BOUND=1"
env_variant b2 .carry/bin/fp4moe_bounds_bin "FP4MOE_SM90_BOUND=2"
ab_rounds_by_point 340 530 "main b0 b1 b2" \
  "qwen3-235b:w4a16:512 kimi-k2:w4a16:2048 deepseek-v3:w4a16:2048 qwen3-30b:w4a16:512"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
