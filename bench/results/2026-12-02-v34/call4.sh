#!/usr/bin/env bash
# v34 call 4: prepared-tile.sh minrows with main 6278165 (z51), bounds 300 / 360 s. Ran as:
#   sed -e s/z46/z51/g -e "s/ok 330/ok 300/" -e "s/ok 380/ok 360/" bench/results/2026-12-01-v32/prepared-tile.sh > /tmp/mr.sh && bash /tmp/mr.sh minrows
sed -e s/z46/z51/g -e "s/ok 330/ok 300/" -e "s/ok 380/ok 360/" bench/results/2026-12-01-v32/prepared-tile.sh > /tmp/mr.sh && bash /tmp/mr.sh minrows
