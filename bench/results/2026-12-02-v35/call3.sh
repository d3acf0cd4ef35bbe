#!/usr/bin/env bash
# v35 call 3 (carry [".carry/z52"]; 364 s): v34's prepared per-node and token-tile run, unchanged.
exec bash bench/results/2026-12-02-v34/prepared-rows.sh "$@"
