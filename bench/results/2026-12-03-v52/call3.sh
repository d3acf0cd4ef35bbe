#!/usr/bin/env bash
# v52 call 3 (carry [".carry/t52"]: main 9fc447e's test binary, sm_90a, stripped; timeout_s 300):
# the whole test binary, EP apart, in 8 shards (FP4MOE_DECODE_EDGE's code, c2c3006, had not run
# through it on a GPU).
set -u
source scripts/device_lib.sh
unxz .carry/t52/tests.xz .carry/bin/fp4moe_tests
suite_shards
