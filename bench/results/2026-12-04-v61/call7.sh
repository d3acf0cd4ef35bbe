#!/usr/bin/env bash
# v61 call 7 (carry [".carry/mn61", ".carry/rq61"]: main's CLI; the requantization change's test
# binary and CLI, sm_90a, stripped, xz). The staging kernels' values without the codes
# (e2m1_round_f32) and their row search by warp ballots: the new tests, memcheck / racecheck
# over them, the whole test binary (EP apart), then ncu of the two changed kernels on main and
# on the change at three W4A4 points, and the layer A/B (--check in round 1) at two. ~520 s.
set -u
source scripts/device_lib.sh
unxz .carry/rq61/tests.xz .carry/bin/fp4moe_tests
unxz .carry/rq61/cli.xz .carry/bin/fp4moe_rq
unxz .carry/mn61/cli.xz .carry/bin/fp4moe_main
.carry/bin/fp4moe_tests --gtest_filter='CudaStaging*:CudaQuantize*:FormatE2m1*' > "$OUT/new-tests.txt" 2>&1
echo "new tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/new-tests.txt" | tr '\n' ' ')"
sanitizers 'CudaStaging*:CudaQuantize*' 45
suite_shards
echo "suite t=$(( $(date +%s) - start ))"
cat "$OUT/suite-summary.txt" 2>/dev/null | tail -5
mkdir -p "$OUT/ncu"
for point in qwen3-30b@8192 kimi-k2@16384 deepseek-v3@2048; do
  for v in main rq; do
    ok 400 || break 2
    m=${point%@*} tok=${point#*@}
    timeout 60 ncu --clock-control none -k regex:nvfp4_values --metrics gpu__time_duration.sum --csv --print-units base \
      .carry/bin/fp4moe_$v bench --model $m --quant w4a4 --tokens $tok --iters 1 --copies 1 --warmup-ms 0 --no-check \
      --no-ceilings --no-baseline > "$OUT/ncu/$m-$tok-$v.csv" 2> "$OUT/ncu/$m-$tok-$v.err"
    echo "ncu $m T=$tok $v rc=$?: $(grep -h 'gpu__time_duration' "$OUT/ncu/$m-$tok-$v.csv" | awk -F'","' '{print $5 "=" $NF}' | tr -d '"' | tr '\n' ' ')"
  done
done
(cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
ab_rounds_by_point 450 500 "main rq" "qwen3-30b:w4a4:8192 kimi-k2:w4a4:16384"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main
