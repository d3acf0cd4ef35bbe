#!/usr/bin/env bash
# v53 call 3 (carry [".carry/r51c", ".carry/lf53"]: main's CLI, the same kernels as main, and branch
# ldfull's with FP4MOE_SM80_INSIDE_MIN_KB; timeout_s 560).
# Part 1: why does ldfull lose 1.8-3.1% at qwen3-30b T = 32 (v53 call 2) where the other presets
# gain? Its GEMM 2 has K = 768: 12 k-blocks, so the untested loop runs once and the tested one
# after it. Variants: main; lf (default, untested loop wherever K % 64 == 0); lf13 (only where
# KB >= 13: qwen3-30b's GEMM 2 runs the tested loop alone, as on main); lfoff (nowhere: the
# ldfull binary with main's loop). Point-major, 4 rounds, 2 s of replays each.
# Part 2: the README's rows the fast path runs (T = 8 / 32 / 128) on every preset, both timings,
# with the ldfull CLI at its default; qwen3-30b again with FP4MOE_SM80_INSIDE_MIN_KB=13.
set -u
source scripts/device_lib.sh
unxz .carry/r51c/cli.xz .carry/bin/fp4moe_main
unxz .carry/lf53/cli.xz .carry/bin/fp4moe_lf
env_variant lf13 .carry/bin/fp4moe_lf "FP4MOE_SM80_INSIDE_MIN_KB=13"
env_variant lfoff .carry/bin/fp4moe_lf "FP4MOE_SM80_INSIDE_MIN_KB=100000"
clocks_start 200
mark part1
ab_rounds_by_point 150 200 "main lf lf13 lfoff" "qwen3-30b:w4a16:32,128 qwen3-30b:w4a4:32"
echo "rounds $ab_round t=$(( $(date +%s) - start ))"
ab_report main | tee $OUT/ab-report.txt
for timing in sustained:2000 short:0; do
  name=${timing%%:*}; ms=${timing##*:}
  mkdir -p $OUT/j-$name
  for m in kimi-k2 deepseek-v3 qwen3-235b qwen3-30b gpt-oss-120b qwen3-30b:13; do
    ok 500 || break
    env=(); tag=$m
    [ "$m" = qwen3-30b:13 ] && { env=(FP4MOE_SM80_INSIDE_MIN_KB=13); m=qwen3-30b; tag=qwen3-30b-minkb13; }
    mark $name $tag
    env "${env[@]}" timeout 100 .carry/bin/fp4moe_lf bench --model $m --all --tokens 8,32,128 --warmup-ms $ms \
      --no-check --no-baseline --json $OUT/j-$name/$(date +%F)-h200-v53-$name-$tag.json > $OUT/j-$name/$tag.txt 2>&1
    echo "$name $tag rc=$? t=$(( $(date +%s) - start ))"
  done
  (cd $OUT && tar czf j-$name.tgz j-$name)
done
clocks_stop
python3 scripts/bench_table.py $OUT/j-*/*.json 2>&1 | grep -E "^### |^\| [0-9]" | awk -F'|' '/^### /{print} /^\| [0-9]/{printf "%s|%s|%s\n", $2, $3, $6}'
rm -rf $OUT/j-sustained $OUT/j-short
