#!/usr/bin/env bash
# v89: branch epiq-r (with v89's two fixes; carry .carry/v89e/{tests,cli}.xz, built from it) after v89's
# first H100 run of v87's call-epiq.sh: every W4A4 wgmma GEMM test failed on launch counts only
# (check_problem's h_values run of GEMM 1, uncounted), and racecheck reported 24 hazards in the
# one-kernel layer (main's too). Both fixed on the branch; one call:
#   1. the whole test binary, EP apart (8 shards);
#   2. bench --check at SPECS (default none: v89's first call passed the four W4A4 points);
#   3. until CALL_S (330) s since start, memcheck over the staging and W4A4 wgmma tests beside
#      sanitize_parallel's six jobs (racecheck over the one-kernel layer among them).
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v89e/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/v89e/cli.xz .carry/bin/fp4moe_epiq || exit 1
staging_branch_checks epiq "${SPECS:-}" \
  "$staging_cases" \
  ${CALL_S:-330}
