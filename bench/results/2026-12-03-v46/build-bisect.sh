#!/usr/bin/env bash
# Builds here (2 cores, ~4-5 min each, incremental in one worktree) the sm_90a Release CLIs that
# prepared-bisect.sh compares: .carry/b-<commit>/cli.xz (stripped, xz), from the oldest commit
# on. v35's code is d50d413; main's is whatever commit is checked out (built as .carry/b-main).
# A CLI already in .carry is kept: remove .carry/b-main to rebuild it after main moves.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
wt=${BISECT_WORKTREE:-/tmp/fp4moe-bisect}
[ -d "$wt" ] || git worktree add -f "$wt" d50d413 >/dev/null
cmake -S "$wt" -B "$wt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a >/dev/null
for c in d50d413 fe04fb5 d2f1719 467b4cd 86c5f84 main; do
  dest=$root/.carry/b-$c
  [ -f "$dest/cli.xz" ] && continue
  if [ $c = main ]; then git -C "$wt" checkout -q --detach "$(git rev-parse HEAD)"; else git -C "$wt" checkout -q $c; fi
  ninja -C "$wt/build" -j2 fp4moe_cli >/dev/null
  mkdir -p "$dest" && cp "$wt/build/fp4moe" "$dest/cli" && strip "$dest/cli" && xz -T2 -6 -f "$dest/cli"
  echo "built $c"
done
