#!/usr/bin/env bash
# v78: racecheck (then memcheck, time allowing) over the width split at every narrow width,
# one narrow_* case at a time (Narrow/CudaGemmSm90Widths.*), within CALL_S seconds.
# Carry .carry/v78 (tests.xz: main's kernels and the per-case test).
set -u
start=$(date +%s)
CALL_S=${CALL_S:-540}
mkdir -p .carry/bin
python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.carry/v78/tests.xz'),open('.carry/bin/fp4moe_tests','wb'))" || exit 1
chmod +x .carry/bin/fp4moe_tests
T=.carry/bin/fp4moe_tests
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
$T --gtest_filter='Narrow/CudaGemmSm90Widths.*:CudaGemmSm90.NarrowCasesCount' > "$OUT/plain.txt" 2>&1
echo "plain rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/plain.txt" | tr '\n' ' ') $(( $(date +%s) - start )) s"
cases=$($T --gtest_list_tests --gtest_filter='Narrow/CudaGemmSm90Widths.*' | sed -n 's/^  \(WidthSplitAtEveryWidth\/[a-z0-9_]*\).*/\1/p')
for tool in racecheck memcheck; do
  for c in $cases; do
    left=$(( CALL_S - ($(date +%s) - start) ))
    [ $left -lt 20 ] && { echo "$tool $c: not started (time)"; continue; }
    t0=$(date +%s)
    timeout $left compute-sanitizer --tool $tool --error-exitcode 3 $T \
      --gtest_filter="Narrow/CudaGemmSm90Widths.$c" > /tmp/one.txt 2>&1
    rc=$?
    { echo "==== $tool $c rc=$rc"; tail -c 20000 /tmp/one.txt; } >> "$OUT/$tool.txt"
    echo "$tool $c rc=$rc $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' /tmp/one.txt | tr '\n' ' ')"
  done
done
