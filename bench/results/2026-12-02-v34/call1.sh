#!/usr/bin/env bash
# v34 call 1 (carry [".carry/z51", ".carry/z46"]: main 6278165's CLI and test binary, main
# 1028681's CLI; ~330 s): v33's prepared-verify.sh with 6278165's binaries in place of 78733f5's.
set -u
sed 's/z49/z51/g' bench/results/2026-12-02-v33/prepared-verify.sh > /tmp/verify.sh
bash /tmp/verify.sh
