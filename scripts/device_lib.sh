# Sourced by the prepared device scripts (bench/results/*/prepared-*.sh) at the repository root:
#   ok SECONDS          true while fewer than SECONDS have passed since this file was sourced
#   unxz FILE.xz DEST   decompresses a carried binary (python's lzma: the device has no xz) and
#                       makes it executable
#   unxz_both DIR       DIR/both.xz (build_gpu_carry.sh's BOTH=1: the test binary and the CLI
#                       of one build in one stream, ~12.6 MB where two files take ~23.6) into
#                       .carry/bin/fp4moe_tests and .carry/bin/fp4moe_VARIANT, VARIANT the 2nd
#                       argument (unxz_both DIR VARIANT)
#   env_variant NAME BIN "VAR=v ..."   .carry/bin/fp4moe_NAME: BIN run under those variables (an
#                       A/B variant that is an environment switch of one binary)
#   ab_point, ab_rounds, ab_rounds_by_point, ab_report   the A/B processes of carried CLIs and
#                       their summary (below); ab_session   an A/B call's timed part (below)
#   filter_tests FILTER NAME [TIMEOUT]   one process of a filter's tests (at most TIMEOUT s,
#                       300 by default), its summary (below)
#   suite_shards        the whole test binary .carry/bin/fp4moe_tests, EP apart, in 8 shards
#                       (below); test_shards and sm90_shards, a filter's tests likewise
#   race_narrow CALL_S  racecheck over the narrow width cases, one process each (below)
#   main_tests CALL_S   the table decode's GPU tests under memcheck, suite_shards, race_narrow
#   sanitize TOOL FILTER TIMEOUT, sanitizers FILTER TIMEOUT   one compute-sanitizer tool, or
#                       memcheck and racecheck, over a filter's tests (below)
#   sanitize_job TOOL NAME FILTER CALL_S, sanitize_parallel CALL_S   the same as parallel
#                       processes (below)
#   check_points VARIANT "SPECS"   bench --check of a carried CLI at each point (below)
#   staging_branch_checks VARIANT "SPECS" FILTER CALL_S   a staging branch's suite, --check and
#                       parallel sanitizer jobs (below)
#   full_table RUN CLI TAG   the whole table (every preset, both quantizations) with one CLI (below)
#   table RUN CLI SESSION   full_table as the README's short or sustained run (below)
#   branch_checks VARIANT   what a kernel branch runs before its merge: the suite, the sanitizers
#                       over the rsws cases, bench --check at five points (below)
#   clocks_start MS, clocks_stop   the SM clock, power, power-cap flag and temperature every MS ms into
#                       $OUT/clocks.csv (nvidia-smi in the background), until clocks_stop
#   clocks_median       the median SM clock and board power of $OUT/clocks.csv, one line
#   mark TEXT           a timestamped line in $OUT/marks.txt, to place a process on that log
#   ncu_points CLI "POINTS" SECONDS   every kernel of one forward at each MODEL@TOKENS[@QUANT]
#                       under ncu (below), until SECONDS have passed since sourcing
# and creates .carry/bin and $OUT/ab.
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt "$1" ]; }
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2" && chmod +x "$2"; }
unxz_both() {
  python3 - "$1" ".carry/bin/fp4moe_tests" ".carry/bin/fp4moe_$2" <<'PY' && chmod +x .carry/bin/fp4moe_tests ".carry/bin/fp4moe_$2"
import lzma, sys
n = int(open(f"{sys.argv[1]}/both.len").read().split()[0])
data = lzma.open(f"{sys.argv[1]}/both.xz").read()
open(sys.argv[2], "wb").write(data[:n])
open(sys.argv[3], "wb").write(data[n:])
PY
}
env_variant() {
  # A variant named as its own binary (fp4moe_bs for "bs") would replace the binary by a script
  # that execs itself forever: every process of it runs into its timeout with no output (v63).
  if [ "$(realpath -m ".carry/bin/fp4moe_$1")" = "$(realpath -m "$2")" ]; then
    echo "env_variant: variant '$1' would overwrite its binary $2; name the variant or the binary otherwise" >&2
    return 1
  fi
  printf '#!/bin/sh\n%s exec %s "$@"\n' "$3" "$PWD/$2" > ".carry/bin/fp4moe_$1" && chmod +x ".carry/bin/fp4moe_$1"
}
clocks_start() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.sw_power_cap,temperature.gpu --format=csv,noheader \
    -lms "$1" > "$OUT/clocks.csv" 2>&1 &
  clocks_pid=$!
}
clocks_stop() { kill "$clocks_pid"; }
clocks_median() {
  python3 - "$OUT/clocks.csv" <<'PY'
import sys, statistics
rows = [l.split(',') for l in open(sys.argv[1]) if 'MHz' in l and ' W' in l]
mhz = [int(r[1].split()[0]) for r in rows]
w = [float(r[2].split()[0]) for r in rows]
print(f"SM clock median {statistics.median(mhz)} MHz over {len(mhz)} samples; power median {statistics.median(w):.0f} W")
PY
}
mark() { echo "$(date +%H:%M:%S.%N) $*" >> "$OUT/marks.txt"; }
mkdir -p .carry/bin "$OUT/ab"

# ab_point VARIANT ROUND MODEL QUANT TOKENS: one A/B process of .carry/bin/fp4moe_VARIANT (--check
# in round 1), its output $OUT/ab/MODEL_QUANT@TOKENS-VARIANT-rROUND.txt (TOKENS' commas as '+'),
# the names scripts/ab_summary.py reads. The tokens are in the name so that two specs of one
# preset and quantization in a round keep both outputs (v48's call 3 lost all but the last).
# Each token count after AB_WARM_MS (default 2000, the bench's since v51) ms of untimed replays:
# at the power cap's clock; AB_WARM_MS=0 times a rested GPU's first replays; AB_WARM_MS= (empty)
# passes no option, for CLIs before 2daa5eb, which lack it.
ab_point() {
  local chk=--no-check warm=()
  [ "$2" = 1 ] && chk=--check
  [ -n "${AB_WARM_MS-2000}" ] && warm=(--warmup-ms "${AB_WARM_MS-2000}")
  timeout 60 ".carry/bin/fp4moe_$1" bench --model "$3" --quant "$4" --tokens "$5" --iters 40 $chk --no-baseline \
    --no-ceilings "${warm[@]}" > "$OUT/ab/$3_$4@${5//,/+}-$1-r$2.txt" 2>&1
  local rc=$?
  [ $rc = 0 ] || echo "ab_point: $1 $3 $4 $5 round $2 exited $rc$([ $rc = 124 ] && echo ' (timed out)')" >&2
}

# ab_rounds ROUND_S POINT_S "VARIANTS" "SPECS" ["FIRST_SPECS"]: rounds of alternated A/B processes,
# a round begun while fewer than ROUND_S seconds have passed, none started past POINT_S. A round
# runs each variant in turn over SPECS (model:quant:tokens ...), and FIRST_SPECS too in rounds 1-2.
# Leaves the rounds begun in ab_round.
ab_rounds() { ab_loop variant "$@"; }
# ab_rounds_by_point: the same, but each spec runs every variant in turn before the next spec, so
# the variants of a point run minutes apart at most. (ab_rounds runs every spec of one variant,
# then of the next: in v52 the drift between those halves of a round read as -1.8% between two
# variants running the same kernels.)
ab_rounds_by_point() { ab_loop point "$@"; }
# ab_loop ORDER (variant: variant-major; point: spec-major) and ab_rounds' arguments.
ab_loop() {
  ab_round=0
  local order=$1 b m model q toks specs pairs pair
  shift
  while ok "$1"; do
    ab_round=$((ab_round + 1))
    specs="$4"
    [ $ab_round -le 2 ] && specs="$specs ${5:-}"
    pairs=()
    if [ "$order" = point ]; then
      for m in $specs; do for b in $3; do pairs+=("$b $m"); done; done
    else
      for b in $3; do for m in $specs; do pairs+=("$b $m"); done; done
    fi
    for pair in "${pairs[@]}"; do
      ok "$2" || return 0
      read -r b m <<< "$pair"
      IFS=: read -r model q toks <<< "$m"
      ab_point "$b" $ab_round "$model" "$q" "$toks"
    done
  done
}

# ab_report BASE: the rounds begun and the seconds since sourcing, the A/B outputs that FAIL,
# round 1's PASS counts, the medians against variant BASE (scripts/ab_summary.py); then
# $OUT/ab.tgz in place of $OUT/ab.
ab_report() {
  echo "rounds ${ab_round:-0} t=$(( $(date +%s) - start ))"
  grep -l FAIL "$OUT"/ab/*.txt; grep -c PASS "$OUT"/ab/*-r1.txt | tr '\n' ' '; echo
  python3 scripts/ab_summary.py "$OUT/ab" --base "$1"
  (cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
}

# ab_session ROUND_S POINT_S "VARIANTS" "SPECS": an A/B call's timed part. The SM clock logged
# (clocks_start 200), ab_rounds_by_point, and every 20 s the rounds so far in $OUT/ab-partial.tgz
# (a call cut by its limit still brings them back); then ab_report against the first variant
# and clocks_median, both into $OUT/ab-summary.txt, and the partial copy removed.
ab_session() {
  # its output away from the call's: a sleep it left running would hold that open past the end
  ( while sleep 20; do (cd "$OUT" && tar czf ab-partial.tgz ab clocks.csv 2>/dev/null); done ) >/dev/null 2>&1 &
  local partial_pid=$!
  clocks_start 200
  ab_rounds_by_point "$1" "$2" "$3" "$4"
  clocks_stop
  kill "$partial_pid"
  ab_report "${3%% *}" | tee "$OUT/ab-summary.txt"
  clocks_median | tee -a "$OUT/ab-summary.txt"
  rm -f "$OUT/ab-partial.tgz"
}

# filter_tests FILTER NAME [TIMEOUT]: the tests of .carry/bin/fp4moe_tests that FILTER picks
# (GoogleTest), in one process of at most TIMEOUT s (300): a line with its exit status and
# GoogleTest's summary, on a timeout a line naming the test that was running, then its failures;
# the log in $OUT/NAME.txt.
filter_tests() {
  timeout "${3:-300}" .carry/bin/fp4moe_tests --gtest_filter="$1" > "$OUT/$2.txt" 2>&1
  local rc=$?
  echo "$2 rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$2.txt" | tr '\n' ' ')"
  # A kernel that hangs holds the call until its limit (v64: a TMA box issued by every lane of a
  # warp overran its barrier's count): the test that was running, by name.
  [ $rc = 124 ] && echo "$2 timed out after ${3:-300} s in $(grep -E '^\[ RUN      \]' "$OUT/$2.txt" | tail -1 | cut -c14-)"
  grep -E '^\[  FAILED' "$OUT/$2.txt" | head -20
}
# test_shards FILTER TIMEOUT: the tests of .carry/bin/fp4moe_tests that FILTER picks (GoogleTest),
# in 8 shards at once, each at most TIMEOUT s: the shards' lines in $OUT/suite-summary.txt, their
# logs in $OUT/suite.tgz.
test_shards() {
  OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER="$1" TESTS_TIMEOUT=$2 timeout $(($2 + 20)) bash scripts/gpu_suite.sh tests 2>&1 |
    grep -E "^== |FAILED" | tee "$OUT/suite-summary.txt"
  (cd "$OUT" && tar czf suite.tgz suite && rm -rf suite)
  echo "tests t=$(( $(date +%s) - start ))"
}
# suite_shards: the whole test binary, EP apart (gpu_suite.sh tests, 280 s at most; shard 0 needed ~200 s in v59).
suite_shards() { test_shards '-*Ep*' 260; }
# race_narrow CALL_S: racecheck over the width split's narrow cases (Narrow/CudaGemmSm90Widths), one
# process each (racecheck over all six in one process outlasts a call), skipping those RACE_DONE
# names (default: none) and starting none with fewer than 20 s left of CALL_S since sourcing:
# a line each, their logs' tails in $OUT/racecheck.txt.
race_narrow() {
  local T=.carry/bin/fp4moe_tests one=$OUT/racecheck-one.txt cases c d left t0 rc
  cases=$($T --gtest_list_tests --gtest_filter='Narrow/CudaGemmSm90Widths.*' |
    sed -n 's/^  \(WidthSplitAtEveryWidth\/[a-z0-9_]*\).*/\1/p')
  for d in ${RACE_DONE:-}; do cases=$(echo "$cases" | grep -vx "WidthSplitAtEveryWidth/$d"); done
  for c in $cases; do
    left=$(( $1 - ($(date +%s) - start) ))
    [ $left -lt 20 ] && { echo "racecheck $c: not started (time)"; continue; }
    t0=$(date +%s)
    timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $T \
      --gtest_filter="Narrow/CudaGemmSm90Widths.$c" > "$one" 2>&1
    rc=$?
    { echo "==== racecheck $c rc=$rc"; tail -c 20000 "$one"; } >> "$OUT/racecheck.txt"
    echo "racecheck $c rc=$rc $(( $(date +%s) - t0 )) s: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' "$one" | tr '\n' ' ')"
  done
  rm -f "$one"
}
# main_tests CALL_S: what a session runs of .carry/bin/fp4moe_tests on a GPU with no kernel change
# to A/B (v81-v82): the table decode's GPU tests, alone and under memcheck, the whole binary
# (suite_shards), then race_narrow until CALL_S seconds since sourcing.
main_tests() {
  local decode='CudaGemmLayout.FragmentWord*:CudaGemmLayout.HighHalf*'
  filter_tests "$decode" decode 60
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 .carry/bin/fp4moe_tests --gtest_filter="$decode" \
    > "$OUT/memcheck-decode.txt" 2>&1
  echo "memcheck decode rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$OUT/memcheck-decode.txt" | tr '\n' ' ')"
  suite_shards
  race_narrow "$1"
}
# The wgmma GEMM and layer tests (sm90_shards TIMEOUT).
sm90_shards() {
  test_shards '*Sm90*:CudaGemmCases/*:Table/CudaLayerConformance.*:CudaLayer.*:CudaGemmEdge.*:CudaGemmConfig.*' "$1"
}
# sanitize TOOL FILTER TIMEOUT: compute-sanitizer's TOOL over the tests of .carry/bin/fp4moe_tests
# that FILTER picks, at most TIMEOUT s: $OUT/TOOL.txt and a line with its exit status and summary.
sanitize() { echo "$1 $(sanitize_log "$1" "$2" "$3" "$OUT/$1.txt")"; }
# sanitize_log TOOL FILTER TIMEOUT LOG: that process with its output in LOG; prints its exit
# status and summary.
sanitize_log() {
  timeout "$3" compute-sanitizer --tool "$1" --error-exitcode 3 .carry/bin/fp4moe_tests --gtest_filter="$2" \
    > "$4" 2>&1
  echo "rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$4" | tr '\n' ' ')"
}
# sanitizers FILTER TIMEOUT: sanitize memcheck, then racecheck, over the same tests.
sanitizers() {
  sanitize memcheck "$1" "$2"
  sanitize racecheck "$1" "$2"
}
# check_points VARIANT "SPECS": bench --check of .carry/bin/fp4moe_VARIANT at each
# model:quant:tokens of SPECS, one process each: a line each with its exit status and PASS
# lines, the outputs in $OUT/check.tgz.
check_points() {
  local m model q toks
  mkdir -p "$OUT/check"
  for m in $2; do
    IFS=: read -r model q toks <<< "$m"
    ".carry/bin/fp4moe_$1" bench --model "$model" --quant "$q" --tokens "$toks" --check \
      > "$OUT/check/$model-$q-$toks.txt" 2>&1
    echo "check $m rc=$? $(grep -c PASS "$OUT/check/$model-$q-$toks.txt") PASS lines"
  done
  (cd "$OUT" && tar czf check.tgz check && rm -rf check)
}
# pytest_wheel WHEEL TIMEOUT: the Python suite (tests/python) against the carried wheel WHEEL,
# installed into /tmp/site (nothing can be installed on the machine itself), run from an empty
# folder so that the source tree's package is not imported; its log $OUT/pytest.log, a line with
# its exit status and its summary lines.
pytest_wheel() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$1" ||
    return 1
  local root=$PWD
  (cd "$(mktemp -d)" && PYTHONPATH=/tmp/site timeout "$2" python3 -m pytest -q -p no:cacheprovider -rs \
    --rootdir "$root" "$root/tests/python" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?")
  grep -E "passed|failed|SKIPPED|Error" "$OUT/pytest.log" | tail -8
}
# full_table RUN CLI TAG: `bench` of every preset in both quantizations at T = 1-16384 with the
# carried CLI CLI, one process per preset and quantization, each at most 150 s and all within
# TABLE_BUDGET_S (540); the SM clock logged. Environment: WARM_MS (--warmup-ms, 2000),
# EXTRA (more bench arguments: --check), BASELINE=1 (keep the bf16 cuBLAS baseline, else
# --no-baseline). JSONs $OUT/j/TAG-RUN-<preset>.json (tarred into $OUT/j-RUN.tgz: a call returns
# at most 8 files), $OUT/clocks-RUN.csv, $OUT/marks-RUN.txt; prints each process's status, the
# ceilings, the PASS count and a short table (T, µs, floor/time) last. The v55 and v58 full
# tables: RUN short (WARM_MS=0 EXTRA=--check BASELINE=1) and sustained (the defaults).
full_table() {
  local run=$1 cli=$2 tag=$3 spec m q left name base=--no-baseline t0
  local sel
  [ "${BASELINE:-0}" = 1 ] && base=
  mkdir -p "$OUT/j"
  clocks_start 100
  t0=$(date +%s)
  for spec in kimi-k2:w4a16 kimi-k2:w4a4 deepseek-v3:w4a16 deepseek-v3:w4a4 gpt-oss-120b:all qwen3-235b:all qwen3-30b:all; do
    m=${spec%%:*}; q=${spec##*:}
    left=$(( ${TABLE_BUDGET_S:-540} - ($(date +%s) - t0) )); [ $left -gt 30 ] || break
    [ $left -gt 150 ] && left=150
    if [ "$q" = all ]; then sel=(--all); name=$m; else sel=(--quant $q --tokens 1,8,32,128,512,2048,8192,16384); name=$m-$q; fi
    mark start "$run" "$name"
    timeout $left "$cli" bench --model "$m" "${sel[@]}" --warmup-ms "${WARM_MS:-2000}" ${EXTRA:-} $base \
      --json "$OUT/j/$tag-$run-$name.json" > "$OUT/j/$run-$name.txt" 2>&1
    echo "$run $name rc=$? t=$(( $(date +%s) - t0 ))"
  done
  clocks_stop
  mv "$OUT/clocks.csv" "$OUT/clocks-$run.csv" 2>/dev/null; mv "$OUT/marks.txt" "$OUT/marks-$run.txt" 2>/dev/null
  grep -h "ceilings (this" "$OUT"/j/$run-*.txt | head -3
  echo "PASS lines: $(cat "$OUT"/j/$run-*.txt | grep -c PASS)  FAIL files: $(grep -l FAIL "$OUT"/j/$run-*.txt | tr '\n' ' ')"
  (cd "$OUT" && tar czf "j-$run.tgz" j)
  python3 scripts/bench_table.py "$OUT"/j/*-$run-*.json 2>&1 | grep -E "^##|^### |^\| [0-9]" |
    awk -F'|' '/^##/{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
}
# table RUN CLI SESSION: full_table as the README's two runs, RUN short (WARM_MS=0, --check, the
# bf16 cuBLAS baseline; TABLE_BUDGET_S 540 unless set) or sustained (WARM_MS=2000, EXTRA as set;
# TABLE_BUDGET_S 480 unless set), tagged DATE-CARD-SESSION, CARD h200 / h100 / gpu by the name
# nvidia-smi gives (a call may get another card than it named).
table() {
  local card
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=gpu ;;
  esac
  case "$1" in
    short) WARM_MS=0 EXTRA=--check BASELINE=1 TABLE_BUDGET_S=${TABLE_BUDGET_S:-540} \
             full_table short "$2" "$(date +%F)-$card-$3" ;;
    sustained) WARM_MS=2000 EXTRA=${EXTRA-} TABLE_BUDGET_S=${TABLE_BUDGET_S:-480} \
             full_table sustained "$2" "$(date +%F)-$card-$3" ;;
    *) echo "table: RUN: got '$1', need short or sustained" >&2; return 2 ;;
  esac
}
# staging_cases: the W4A4 staging's tests and the W4A4 GEMM cases that run it (a GoogleTest
# filter): the FILTER of staging_branch_checks for the staging branches from v87 on.
staging_cases='CudaStaging.*:CudaQuantize.*:Cases/CudaGemmSm90Forced.MatchesHost/*w4a4*:CudaGemmCases/CudaGemm.MatchesHost/*w4a4*:Narrow/CudaGemmSm90Widths.*'
# rsws_sanitize_cases: the 40 forced rsws / rsws4 cases of one k-block, of odd KB and of MXFP4
# (a GoogleTest filter; a branch's script may add its own cases after a ':').
rsws_sanitize_cases='Cases/CudaGemmSm90Forced.MatchesHost/*one_kblock*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*large_nvfp4_odd*rsws*:Cases/CudaGemmSm90Forced.MatchesHost/*mx*rsws*'
# sanitize_job TOOL NAME FILTER CALL_S: sanitize as one of several processes at once (the
# instrumentation is host-bound; the machine has 16 cores), until CALL_S s since sourcing: its
# log $OUT/TOOL-NAME.txt, its line in $OUT/TOOL-NAME.line. Start it with & and wait.
sanitize_job() {
  local l=$(( $4 - ($(date +%s) - start) ))
  if [ "$l" -gt 20 ]; then
    echo "$1 $2 $(sanitize_log "$1" "$3" "$l" "$OUT/$1-$2.txt")" > "$OUT/$1-$2.line"
  else
    echo "$1 $2: not started (time)" > "$OUT/$1-$2.line"
  fi
}
# sanitize_parallel CALL_S: memcheck and racecheck over the fast path's tile tests, the decode
# kernels with the one-kernel layer, and rsws_sanitize_cases, six sanitize_jobs at once; waits
# for them (and for jobs the caller started before), then gathers every job's line into
# $OUT/sanitize-lines.txt and its log into $OUT/sanitize.tgz (a call returns at most 8 files)
# and prints the lines.
sanitize_parallel() {
  local tool decode='CudaGemmDecodeSplitCounts/*:CudaLayer.OneKernel*:CudaLayer.OneToken*'
  for tool in memcheck racecheck; do
    sanitize_job $tool tiles 'CudaGemmSm80Tiles/*' "$1" &
    sanitize_job $tool decode "$decode" "$1" &
    sanitize_job $tool rsws "$rsws_sanitize_cases" "$1" &
  done
  wait
  (
    cd "$OUT" && shopt -s nullglob && local logs=(memcheck-*.txt racecheck-*.txt) &&
      cat ./*.line > sanitize-lines.txt && rm -f ./*.line &&
      { [ ${#logs[@]} -eq 0 ] || { tar czf sanitize.tgz "${logs[@]}" && rm -f "${logs[@]}"; }; }
  )
  cat "$OUT/sanitize-lines.txt"
}
# staging_branch_checks VARIANT "SPECS" FILTER CALL_S: a W4A4 staging branch's checks before its
# A/B and merge, with .carry/bin/fp4moe_tests and .carry/bin/fp4moe_VARIANT in place: the whole
# test binary, EP apart (suite_shards; SKIP_SUITE=1 skips it), check_points at SPECS, then until
# CALL_S s since sourcing memcheck over FILTER (the staging's tests) beside sanitize_parallel's
# six jobs. v86's call-kaddr.sh and v87's call-epiq.sh.
staging_branch_checks() {
  ${SKIP_SUITE:+false} suite_shards
  echo "suite t=$(( $(date +%s) - start ))"
  check_points "$1" "$2"
  echo "check t=$(( $(date +%s) - start ))"
  sanitize_job memcheck staging "$3" "$4" &
  sanitize_parallel "$4"
  echo "t=$(( $(date +%s) - start ))"
}
# branch_checks VARIANT: the checks of a branch of the rsws kernels before its A/B and merge, with
# .carry/bin/fp4moe_tests and .carry/bin/fp4moe_VARIANT in place: the whole test binary, EP
# apart (suite_shards); memcheck and racecheck over the forced rsws / rsws4 cases of one k-block,
# of odd KB and of MXFP4 (40 tests); bench --check at a point of each rsws kernel (rsws4 GEMM 1
# and 2 at 48 tokens, W4A4, the 128-token kernels, MXFP4 narrow and wide). v57's and v58's
# prepared test scripts.
branch_checks() {
  suite_shards
  sanitizers "$rsws_sanitize_cases" 200
  check_points "$1" "deepseek-v3:w4a16:2048 kimi-k2:w4a4:1024 qwen3-235b:w4a16:8192 gpt-oss-120b:w4a16:512 gpt-oss-120b:w4a16:8192"
}

# ncu_points CLI "POINTS" SECONDS: at each MODEL@TOKENS[@QUANT] (QUANT default w4a16), every
# kernel of one forward of CLI under ncu, serialized, --clock-control none: duration, DRAM
# throughput, issue slots busy, ALU / FMA / uniform / tensor pipes, warps resident and SM clock,
# as columns (scripts/ncu_breakdown.py) in $OUT/breakdown.txt; the CSVs in $OUT/ncu.tgz. Stops
# before a point when SECONDS have passed since sourcing (each point takes up to 120 s). v55's
# and v61's call 3 spelled this out.
ncu_points() {
  local cli=$1 points=$2 limit=$3 point m rest tok q f tensor metrics
  ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' |
    grep -E '^sm__(pipe_tensor_op_(gmma|hmma)_cycles_active|inst_executed_pipe_tensor_op_(gmma|hmma))$' > "$OUT/tensor-metrics.txt"
  tensor=$(sed -n 's/^sm__pipe_tensor_op_\(.*\)_cycles_active$/sm__pipe_tensor_op_\1_cycles_active.avg.pct_of_peak_sustained_active/p' "$OUT/tensor-metrics.txt" | paste -sd,)
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active
  metrics=$metrics,smsp__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
  metrics=$metrics,smsp__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
  metrics=$metrics,sm__cycles_elapsed.avg.per_second${tensor:+,$tensor}
  mkdir -p "$OUT/ncu"
  for point in $points; do
    ok $(( limit - 120 )) || break
    m=${point%%@*} rest=${point#*@}
    tok=${rest%%@*} q=w4a16
    [ "$rest" != "$tok" ] && q=${rest#*@}
    f=$OUT/ncu/$m-$q-$tok
    timeout 120 ncu --clock-control none --metrics "$metrics" --launch-skip 0 --launch-count 30 --csv --print-units base \
      "$cli" bench --model "$m" --quant "$q" --tokens "$tok" --iters 1 --copies 1 --warmup-ms 0 --no-check --no-ceilings \
      --no-baseline > "$f.csv" 2> "$f.err"
    echo "== $m $q T=$tok rc=$? t=$(( $(date +%s) - start ))" | tee -a "$OUT/breakdown.txt"
    python3 scripts/ncu_breakdown.py "$f.csv" 2>&1 | grep -v '^    ' | tee -a "$OUT/breakdown.txt"
  done
  (cd "$OUT" && tar czf ncu.tgz ncu tensor-metrics.txt && rm -rf ncu)
}
