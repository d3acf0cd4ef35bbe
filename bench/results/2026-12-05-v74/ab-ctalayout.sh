#!/usr/bin/env bash
# v74 probe (timing only): does reading each fast-path CTA's weights as one contiguous stream
# (its 8 fragment blocks of a k-block as 4 KiB in a row, k-block after k-block) instead of the
# fragment layout's 8 streams 57 KB apart (kimi-k2 GEMM 1) lower the energy per weight byte, so
# that the sustained (power-capped) clock and time improve at T = 8-128?
# Carry [".carry/ab"]: fp4moe-main (main's CLI) and fp4moe-probe (branch probe-ctalayout: the same
# source with FP4MOE_PROBE_CTA_LAYOUT on in gemm_sm80_kernel.cuh; it reads the same bytes of each
# CTA tile's region in another order, so its results are wrong by design: its --check FAILs).
# Both sm_90a, stripped. Alternated processes point by point, after 2 s of untimed replays.
set -u
source scripts/device_lib.sh
cp .carry/ab/fp4moe-main .carry/bin/fp4moe_main
cp .carry/ab/fp4moe-probe .carry/bin/fp4moe_probe
chmod +x .carry/bin/fp4moe_main .carry/bin/fp4moe_probe
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
specs="kimi-k2:w4a16:8,32,128 deepseek-v3:w4a16:8,32 qwen3-235b:w4a16:32,128 kimi-k2:w4a4:32"
ab_rounds_by_point ${AB_START:-330} ${AB_STOP:-380} "main probe" "$specs"
ab_report main
