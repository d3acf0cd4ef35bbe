#!/usr/bin/env bash
# Prepared in v58 for the next session (branch consts, §3 of the v58 notes). Carry .carry/cs59:
# tests.xz and cli.xz, consts' test binary and CLI (sm_90a, stripped, xz), built by
#   git checkout consts && ninja -C build-carry fp4moe_tests fp4moe
# (scripts/device_lib.sh branch_checks: the steps of v57's next-hoist-tests.sh.) ~330 s.
set -u
source scripts/device_lib.sh
unxz .carry/cs59/tests.xz .carry/bin/fp4moe_tests
unxz .carry/cs59/cli.xz .carry/bin/fp4moe_consts
branch_checks consts
echo "t=$(( $(date +%s) - start ))"
