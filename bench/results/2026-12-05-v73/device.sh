#!/usr/bin/env bash
# v73's device calls: v72's script (PART=short | sustained | suite | pointers, its carries and
# timings), the JSONs tagged v73. Run on the H200 (needs_h200: true) as PART=short (carry
# .carry/cli; 330 s), PART=sustained (.carry/cli; 254 s), PART=suite (.carry/tests, .carry/whl; 221 s).
SESSION=v73 exec bash bench/results/2026-12-05-v72/device.sh "$@"
