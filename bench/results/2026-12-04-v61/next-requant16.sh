#!/usr/bin/env bash
# Prepared in v61 for the next session: branch requant16 (667aa01: the staging values kernel at
# a whole 16-block a lane) against main, and v61's fixed staging test on main. Two calls, each
# within 30 s of the last. Build here first (a fresh checkout has no .carry):
#   for b in main requant16; do git worktree add -f /tmp/wt-$b $b; \
#     cmake -S /tmp/wt-$b -B /tmp/wt-$b/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4MOE_CUDA_ARCHS=90a && \
#     ninja -C /tmp/wt-$b/build fp4moe fp4moe_tests; done
#   mkdir -p .carry/mn62 .carry/rq16
#   for b in main:mn62 requant16:rq16; do w=/tmp/wt-${b%%:*}/build d=.carry/${b#*:}; \
#     strip -o /tmp/t $w/fp4moe_tests && xz -T2 -6 -c /tmp/t > $d/tests.xz; \
#     strip -o /tmp/c $w/fp4moe && xz -T2 -6 -c /tmp/c > $d/cli.xz; done
# Call 1, carry [".carry/mn62/tests.xz", ".carry/rq16"] (64 MiB with the tree): PART=tests
#   main's CudaStaging / CudaQuantize tests (v61's fixed test not yet run on the GPU), then
#   requant16's: the whole binary (EP apart), memcheck / racecheck over the staging tests, and
#   ncu of its two values kernels at v61's three points (v61's call 7 has main's: 130.3 / 700.9 /
#   92.2 µs for bf16_to_nvfp4_values). ~420 s.
# Call 2, carry [".carry/mn62/cli.xz", ".carry/rq16/cli.xz"]: PART=ab, the layer A/B at four
#   W4A4 points, --check in round 1. ~400 s.
set -u
source scripts/device_lib.sh
if [ "${PART:-tests}" = tests ]; then
  unxz .carry/mn62/tests.xz .carry/bin/fp4moe_tests_main
  .carry/bin/fp4moe_tests_main --gtest_filter='CudaStaging*:CudaQuantize*' > "$OUT/main-staging.txt" 2>&1
  echo "main staging tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/main-staging.txt" | tr '\n' ' ')"
  unxz .carry/rq16/tests.xz .carry/bin/fp4moe_tests
  unxz .carry/rq16/cli.xz .carry/bin/fp4moe_rq16
  sanitizers 'CudaStaging*:CudaQuantize*' 60
  suite_shards
  mkdir -p "$OUT/ncu"
  for point in qwen3-30b@8192 kimi-k2@16384 deepseek-v3@2048; do
    ok 520 || break
    m=${point%@*} tok=${point#*@}
    timeout 60 ncu --clock-control none -k regex:nvfp4_values --metrics gpu__time_duration.sum --csv --print-units base \
      .carry/bin/fp4moe_rq16 bench --model $m --quant w4a4 --tokens $tok --iters 1 --copies 1 --warmup-ms 0 --no-check \
      --no-ceilings --no-baseline > "$OUT/ncu/$m-$tok.csv" 2> "$OUT/ncu/$m-$tok.err"
    echo "ncu $m T=$tok rc=$?"
    grep -h 'bf16_to_nvfp4_values' "$OUT/ncu/$m-$tok.csv" | awk -F'","' '{print $NF}' | tr -d '"' | sort -n | sed -n '6p'
  done
  (cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
else
  unxz .carry/mn62/cli.xz .carry/bin/fp4moe_main
  unxz .carry/rq16/cli.xz .carry/bin/fp4moe_rq16
  ab_rounds_by_point 380 560 "main rq16" "qwen3-30b:w4a4:8192 qwen3-30b:w4a4:2048 deepseek-v3:w4a4:2048 kimi-k2:w4a4:16384"
  echo "rounds $ab_round t=$(( $(date +%s) - start ))"
  ab_report main
fi
