#!/usr/bin/env bash
# v62 call 6: branch rsws-stages (rsws one stage short, kRingShort) — its whole test binary
# (EP apart: one GPU), 8 shards. ~210 s.
set -u
source scripts/device_lib.sh
unxz .carry/rs62/tests.xz .carry/bin/fp4moe_tests
suite_shards
echo "t=$(( $(date +%s) - start ))"
