#!/usr/bin/env bash
# v37 call 1 (carry [".carry/z60"]): v36's prepared verification of branch sm90-split-files
# 62fc01d, unchanged.
exec bash bench/results/2026-12-02-v36/prepared-verify.sh
