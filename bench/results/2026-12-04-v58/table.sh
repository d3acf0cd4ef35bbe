#!/usr/bin/env bash
# v58 calls 3-4: the whole table on main with branch hoist merged (kpair merged in v57; v55 ran
# the last full table), hoist's CLI (sm_90a, stripped, xz; the source of main's merge). Carry
# [".carry/hc58"]. What ran (scripts/device_lib.sh full_table; the same steps as v55's table.sh):
#   RUN_NAME=short WARM_MS=0 EXTRA=--check BASELINE=1 TABLE_BUDGET_S=500 bash table.sh   # call 3
#   RUN_NAME=sustained WARM_MS=2000 EXTRA= TABLE_BUDGET_S=420 bash table.sh               # call 4
set -u
source scripts/device_lib.sh
[ -x .carry/bin/fp4moe ] || unxz .carry/hc58/cli.xz .carry/bin/fp4moe
full_table "${RUN_NAME:-sustained}" .carry/bin/fp4moe 2026-12-04-h200-v58
