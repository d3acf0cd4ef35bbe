#!/usr/bin/env bash
# The whole GPU suite, run on the GPU machine from the repository root:
#   bash scripts/gpu_suite.sh [stages...]    stages: tests sanitize bench python (default), compare, profile, stalls, ep, table
# Binaries come prebuilt (scripts/build_gpu_carry.sh puts them in .carry/bin), or are built
# here into build-gpu when .carry/bin is absent. Logs go to $OUT (or ./gpu-out).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=.carry/bin
stages=${*:-tests sanitize bench python}
# sanitize: SANITIZE_FILTER picks the tests (default: every CUDA test but the full-size layers),
# SANITIZE_TOOLS (memcheck racecheck), SANITIZE_SHARDS processes per tool, SANITIZE_TIMEOUT each.
# Logs are bundled into $OUT/logs-<pid>.tgz at the end (the device tool returns few files).
status=0
summary=()

note() { summary+=("$1"); echo "== $1"; }

if [ ! -x "$BIN/fp4moe_tests" ]; then
  cmake -S . -B build-gpu -G Ninja -DFP4MOE_CUDA_ARCHS=90a -DFP4MOE_CLI=OFF >"$OUT/configure.log" 2>&1 &&
    ninja -C build-gpu fp4moe_tests >"$OUT/build.log" 2>&1 || { note "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
  BIN=build-gpu
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"

for stage in $stages; do
  case $stage in
    tests)
      # TESTS_SHARDS processes (GoogleTest sharding) at once, spread over the visible GPUs.
      shards=${TESTS_SHARDS:-1}
      ngpu=$(nvidia-smi -L | wc -l)
      pids=()
      for ((i = 0; i < shards; i++)); do
        (
          [ "$ngpu" -gt 1 ] && [ "$shards" -gt 1 ] && export CUDA_VISIBLE_DEVICES=$((i % ngpu))
          GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout ${TESTS_TIMEOUT:-900} "$BIN/fp4moe_tests" \
            ${TESTS_FILTER:+--gtest_filter=$TESTS_FILTER} >"$OUT/tests-$i.log" 2>&1
          echo "rc=$?" >>"$OUT/tests-$i.log"
        ) &
        pids+=($!)
      done
      wait "${pids[@]}"
      for ((i = 0; i < shards; i++)); do
        f="$OUT/tests-$i.log"
        rc=$(grep -E '^rc=' "$f" | tail -1 | cut -d= -f2)
        grep -E "^\[  FAILED  \]" "$f" | head -20
        note "tests shard $i/$shards rc=$rc $(grep -cE '^\[       OK \]' "$f") ok, $(grep -E '^\[  (PASSED|FAILED)  \]' "$f" | head -2 | tr '\n' ' ')"
        [ "$rc" = 0 ] || status=1
      done ;;
    sanitize)
      # SANITIZE_SHARDS processes per tool (GoogleTest sharding), all at once, spread over
      # the visible GPUs: racecheck over the whole table takes over 7 minutes in one process.
      shards=${SANITIZE_SHARDS:-1}
      ngpu=$(nvidia-smi -L | wc -l)
      pids=()
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        for ((i = 0; i < shards; i++)); do
          (
            [ "$ngpu" -gt 1 ] && export CUDA_VISIBLE_DEVICES=$((i % ngpu))
            GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout ${SANITIZE_TIMEOUT:-1200} \
              compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/fp4moe_tests" \
              --gtest_filter="${SANITIZE_FILTER:-*Cuda*:-*full_*}" --gtest_brief=1 >"$OUT/$tool-$i.log" 2>&1
            echo "rc=$?" >>"$OUT/$tool-$i.log"
          ) &
          pids+=($!)
        done
      done
      wait "${pids[@]}"
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        for ((i = 0; i < shards; i++)); do
          f="$OUT/$tool-$i.log"
          rc=$(grep -E '^rc=' "$f" | tail -1 | cut -d= -f2)
          note "$tool shard $i/$shards rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$f" | head -2 | tr '\n' ' ')"
          grep -E '^\[  FAILED  \]' "$f" | head -5
          [ "$rc" = 0 ] || status=1
        done
      done ;;
    bench)
      if [ -x "$BIN/fp4moe" ]; then
        timeout ${BENCH_TIMEOUT:-900} "$BIN/fp4moe" bench --model ${BENCH_MODEL:-kimi-k2} --tokens ${BENCH_TOKENS:-1,32,512} --check \
          --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -v '\r' | tail -25
        rc=${PIPESTATUS[0]}
        note "bench rc=$rc"
        [ $rc -eq 0 ] || status=1
      else
        note "bench skipped: no fp4moe binary"
      fi ;;
    compare)
      # GEMM paths side by side on the decode-to-prefill range (no check: speed only)
      for gemm in ${COMPARE_GEMMS:-fast decode sm90 splitk stream}; do
        # stream_pdl: the stream path with GEMM 2 as a programmatic dependent of GEMM 1
        FP4MOE_GEMM=${gemm%_pdl} FP4MOE_PDL=$([ "${gemm%_pdl}" != "$gemm" ] && echo 1) timeout ${BENCH_TIMEOUT:-900} "$BIN/fp4moe" bench --model ${BENCH_MODEL:-kimi-k2} \
          --tokens ${COMPARE_TOKENS:-1,8,32,128,512} --iters ${COMPARE_ITERS:-50} --no-check --no-baseline --json "$OUT/compare-$gemm.json" \
          >"$OUT/compare-$gemm.log" 2>&1
        note "compare $gemm rc=$?"
        grep -E "^ +[0-9]+ " "$OUT/compare-$gemm.log" | sed "s/^/  $gemm /"
      done ;;
    profile)
      # Per-kernel durations of one forward (ncu, one pass: gpu__time_duration only), per GEMM
      # path and token count: where the layer's time goes. PROFILE_GEMMS: FP4MOE_GEMM values
      # (sm90 is the default chain: decode, wgmma, fast).
      for gemm in ${PROFILE_GEMMS:-sm90}; do
        for tok in ${PROFILE_TOKENS:-1 32 2048}; do
          FP4MOE_GEMM=$gemm timeout ${PROFILE_TIMEOUT:-120} ncu --clock-control none --metrics gpu__time_duration.sum \
            --launch-skip 0 --launch-count ${PROFILE_LAUNCHES:-40} --csv --print-units base \
            "$BIN/fp4moe" bench --model ${BENCH_MODEL:-kimi-k2} --tokens $tok --iters 1 --copies 1 --no-check --no-ceilings \
            --no-baseline >"$OUT/profile-$gemm-$tok.csv" 2>"$OUT/profile-$gemm-$tok.err"
          note "profile $gemm T=$tok rc=$?"
          python3 scripts/ncu_breakdown.py "$OUT/profile-$gemm-$tok.csv" | tail -12
        done
      done ;;
    stalls)
      # Where the GEMM kernels' warps stall, per SASS instruction: ncu's warp-state samples
      # (SourceCounters), one launch of each kernel below at kimi-k2 shapes with 64 experts
      # (STALL_EXPERTS), printed by scripts/ncu_source_top.py (the instructions with the most
      # samples and their stall reasons; with --regions, the warp-specialized kernels' k loop,
      # epilogue and producer apart). Cases: kernel regex @ tokens; the first launch matching
      # is GEMM 1's (the default wgmma kernel, rsws, at 128- and 64-token tiles, then the fast
      # path and the decode kernel).
      for case in ${STALL_CASES:-sm90_rsws_gemm@4096 sm90_rsws_gemm@1024 sm80_grouped_gemm@512 decode_grouped_gemm@1}; do
        kern=${case%@*} tok=${case#*@}
        rep="$OUT/stalls-$kern-$tok"
        timeout ${STALL_TIMEOUT:-150} ncu --clock-control none -k regex:"$kern" --launch-count 1 \
          --section WarpStateStats --section SourceCounters --section SchedulerStats -f -o "$rep" \
          "$BIN/fp4moe" bench --model ${BENCH_MODEL:-kimi-k2} --experts ${STALL_EXPERTS:-64} --tokens $tok --iters 1 \
          --warmup 0 --sets 1 --no-check --no-ceilings --no-baseline >"$rep.log" 2>&1
        rc=$?
        ncu --import "$rep.ncu-rep" --page source --print-source sass --csv >"$rep.csv" 2>>"$rep.log"
        note "stalls $kern T=$tok rc=$rc"
        python3 scripts/ncu_source_top.py "$rep.csv" --top 15 --regions | head -48
      done ;;
    table)
      # The full bench table (issue 4): every preset, W4A16 and W4A4, T = 1 ... 16384, the
      # presets split over the visible GPUs, one lane each (kimi-k2, checked against the
      # reference, on the first; nothing else runs on a GPU while it is timed). JSON per lane.
      ngpu=$(nvidia-smi -L | wc -l)
      if [ "$ngpu" -ge 2 ]; then lanes=("kimi-k2" "deepseek-v3,qwen3-235b,qwen3-30b,gpt-oss-120b")
      else lanes=("kimi-k2,deepseek-v3,qwen3-235b,qwen3-30b,gpt-oss-120b"); fi
      pids=()
      for ((i = 0; i < ${#lanes[@]}; i++)); do
        (
          export CUDA_VISIBLE_DEVICES=$i
          check=$([ $i = 0 ] && echo --check || echo --no-check)
          timeout ${TABLE_TIMEOUT:-900} "$BIN/fp4moe" bench --all --model "${lanes[$i]}" $check \
            ${TABLE_TOKENS:+--tokens $TABLE_TOKENS} --json "$OUT/table-$i.json" >"$OUT/table-$i.log" 2>&1
          echo "rc=$?" >>"$OUT/table-$i.log"
        ) &
        pids+=($!)
      done
      wait "${pids[@]}"
      for ((i = 0; i < ${#lanes[@]}; i++)); do
        rc=$(grep -E '^rc=' "$OUT/table-$i.log" | tail -1 | cut -d= -f2)
        note "table lane $i (${lanes[$i]}) rc=$rc"
        [ "$rc" = 0 ] || status=1
      done
      python3 scripts/bench_table.py "$OUT"/table-*.json 2>/dev/null | grep -E '^(###|\| [0-9])' | head -90 ;;
    ep)
      # two or more GPUs: the EP tests and the EP benchmark
      timeout ${TESTS_TIMEOUT:-900} "$BIN/fp4moe_tests" --gtest_filter='*Ep*' >"$OUT/ep-tests.log" 2>&1
      rc=$?
      grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/ep-tests.log" | tail -20
      note "ep tests rc=$rc"
      [ $rc -eq 0 ] || status=1
      timeout ${BENCH_TIMEOUT:-900} "$BIN/fp4moe" ep-bench --model ${BENCH_MODEL:-qwen3-30b} \
        --tokens ${EP_TOKENS:-1,16,128,1024,4096} --json "$OUT/ep-bench.json" >"$OUT/ep-bench.log" 2>&1
      note "ep-bench rc=$?"
      tail -15 "$OUT/ep-bench.log" ;;
    python)
      FP4MOE_PYTHON_CUDA=1 FP4MOE_CUDA_ARCHS=90a timeout ${PYTHON_TIMEOUT:-1200} bash scripts/test_python.sh >"$OUT/pytest.log" 2>&1
      rc=$?
      tail -15 "$OUT/pytest.log"
      note "python rc=$rc $(grep -E 'passed|failed' "$OUT/pytest.log" | tail -1)"
      [ $rc -eq 0 ] || status=1 ;;
  esac
done
echo
echo "==== GPU suite summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary-$$.txt"
# The device tool returns a few files only: bundle the logs (BUNDLE=0 keeps them loose).
if [ "${BUNDLE:-1}" = 1 ]; then
  (cd "$OUT" && find . -maxdepth 1 -type f \( -name '*.log' -o -name '*.csv' -o -name '*.err' -o -name '*.txt' \) \
     ! -name "summary-$$.txt" -print0 | tar --null -czf "logs-$$.tgz" --remove-files -T - 2>/dev/null)
fi
exit $status
