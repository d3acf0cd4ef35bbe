#!/usr/bin/env bash
# v35 calls 1 and 2 (carry [".carry/z52"]): v34's prepared full run, unchanged: `bash call1.sh small`
# (call 1, 117 s), then `bash call1.sh large` (call 2, 298 s).
exec bash bench/results/2026-12-02-v34/prepared-table.sh "$@"
