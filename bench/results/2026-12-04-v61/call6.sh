#!/usr/bin/env bash
# v61 call 6 (carry [".carry/mn61"]: main's CLI): what limits the rows below their targets that no
# profile had measured: qwen3-30b at every T, qwen3-235b T = 8 / 128, gpt-oss-120b T = 8. ncu of
# every kernel of one forward (ncu_points), then `bench --nodes` (each node of the graph timed in
# place, at the power cap's clock after 2 s of replays) at qwen3-30b / qwen3-235b T = 8-128.
# ~200 s.
set -u
source scripts/device_lib.sh
[ -x .carry/bin/fp4moe ] || unxz .carry/mn61/cli.xz .carry/bin/fp4moe
ncu_points .carry/bin/fp4moe "qwen3-30b@1 qwen3-30b@8 qwen3-30b@32 qwen3-30b@128 qwen3-30b@512 qwen3-30b@2048 \
  qwen3-30b@8192 qwen3-30b@8192@w4a4 qwen3-235b@8 qwen3-235b@128 gpt-oss-120b@8" 420
for m in qwen3-30b qwen3-235b; do
  ok 500 || break
  timeout 90 .carry/bin/fp4moe bench --model $m --tokens 8,32,128 --nodes --no-check > "$OUT/nodes-$m.txt" 2>&1
  echo "nodes $m rc=$? t=$(( $(date +%s) - start ))"
  grep -v '^setup\|^L2\|^baseline\|^check' "$OUT/nodes-$m.txt" | tail -40
done
