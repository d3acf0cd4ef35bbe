#!/usr/bin/env bash
# Prepared in v30 for the next session (carry [".carry/z42/main.xz"], ~550 s): where the time of
# the mid-T misses goes, measured per node, for the misses' "what limits it" (issue 4).
# 1. --nodes (each graph node timed in place) for qwen3-30b, qwen3-235b, gpt-oss-120b and
#    deepseek-v3, W4A16, T = 8 / 128 / 512 / 2048, one process per preset;
# 2. ncu, one forward each (qwen3-30b and gpt-oss-120b, T = 512 and 2048): per kernel its
#    time, DRAM bytes read and written, and the L2 hit rate, to set each node against its own
#    bytes' floor (scripts/ncu_breakdown.py prints the times; the rest is in the CSV);
# 3. --nodes of kimi-k2 T = 16384, W4A16 and W4A4.
# main's CLI (.carry/z42/main.xz: 531729e's SASS).
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/m
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z42/main.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
for m in qwen3-30b qwen3-235b gpt-oss-120b deepseek-v3; do
  ok 280 || break
  timeout 90 .carry/bin/fp4moe bench --model $m --tokens 8,128,512,2048 --iters 20 --no-check --no-baseline \
    --no-ceilings --nodes > $OUT/m/nodes-$m.txt 2>&1
  echo "nodes $m rc=$? t=$(( $(date +%s) - start ))"
done
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed
for m in qwen3-30b gpt-oss-120b; do
  for t in 512 2048; do
    ok 440 || break
    timeout 60 ncu --clock-control none --metrics $metrics --launch-skip 0 --launch-count 40 --csv --print-units base \
      .carry/bin/fp4moe bench --model $m --tokens $t --iters 1 --warmup 1 --copies 1 --sets 1 --no-check --no-ceilings \
      --no-baseline > $OUT/m/ncu-$m-$t.csv 2> $OUT/m/ncu-$m-$t.err
    echo "ncu $m T=$t rc=$? t=$(( $(date +%s) - start ))"
    python3 scripts/ncu_breakdown.py $OUT/m/ncu-$m-$t.csv | tail -12
  done
done
# kimi-k2 T = 16384, W4A16 and W4A4: why W4A4's two extra passes (~1.6 GB) cost it almost nothing (notes v30 §4)
for q in w4a16 w4a4; do
  ok 470 || break
  timeout 75 .carry/bin/fp4moe bench --model kimi-k2 --quant $q --tokens 16384 --iters 10 --no-check --no-baseline \
    --no-ceilings --nodes > $OUT/m/nodes-kimi-$q.txt 2>&1
  echo "nodes kimi-k2 $q rc=$? t=$(( $(date +%s) - start ))"
done
for f in $OUT/m/nodes-*.txt; do echo "== $f"; grep -E "^ +[0-9]+ +[0-9.]+ |^ +[0-9.]+  [a-z_]" $f | head -40; done
cd $OUT && tar czf m.tgz m && rm -rf m
