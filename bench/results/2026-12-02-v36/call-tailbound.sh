#!/usr/bin/env bash
# v36 call 3 (carry [".carry/z56"]: branch tail-bound a8de574's CLI): v35's prepared script, unchanged.
bash bench/results/2026-12-02-v35/prepared-tailbound.sh
