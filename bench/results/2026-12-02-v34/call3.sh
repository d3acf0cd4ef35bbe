#!/usr/bin/env bash
# v34 call 3 (carry [".carry/z50", ".carry/z51"]; ~420 s): pair16 against main 6278165 where
# the 16-token tile runs (prepared-pair16.sh ab, with main's CLI from z51).
set -u
sed 's/z49/z51/g' bench/results/2026-12-02-v33/prepared-pair16.sh > /tmp/p16.sh
bash /tmp/p16.sh ab
