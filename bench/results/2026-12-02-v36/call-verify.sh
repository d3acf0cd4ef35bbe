#!/usr/bin/env bash
# v36 call 1 (carry [".carry/z57"]: main 0b7f0a6's test binary and CLI, sm_90a): v35's
# prepared verify script on z57 in place of z55 (z55 predated 0b7f0a6's host-side changes).
sed 's#z55#z57#g' bench/results/2026-12-02-v35/prepared-verify.sh | bash
