#!/usr/bin/env bash
# v91: the sanitizer jobs that ran out of v90's call 1 (carry .carry/v91/tests.xz, main 9ebefe5,
# kaddr merged): until CALL_S (500) s since start, sanitize_parallel's six jobs (memcheck and
# racecheck over the fast path's tiles, the decode kernels with the one-kernel layer, the forced
# rsws cases) beside memcheck and racecheck over the W4A4 staging and wgmma tests.
set -u
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
unxz .carry/v91/tests.xz .carry/bin/fp4moe_tests || exit 1
sanitize_job memcheck staging "$staging_cases" ${CALL_S:-500} &
sanitize_job racecheck staging "$staging_cases" ${CALL_S:-500} &
sanitize_parallel ${CALL_S:-500}
echo "t=$(( $(date +%s) - start ))"
# As run in v91 this script archived the logs itself, as h100-sanitize/logs.tgz and lines.txt;
# sanitize_parallel does that since (sanitize.tgz, sanitize-lines.txt).
