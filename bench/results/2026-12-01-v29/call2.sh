#!/usr/bin/env bash
# Prepared in v28, for the next session (carry [".carry/z39"], ~450 s): ncu source counters of
# the first rsws launch (GEMM 1 at 128-token tiles: v26 call 4, and the order of v28's --nodes),
# qwen3-235b T = 16384, W4A16, on main (base) and on epi-act (act), summed by region
# (scripts/ncu_source_top.py --regions): the epilogue's share of the samples and its stall
# reasons. v26's (call 4, before v27/v28): 11.1% of the samples, 23.3% of the executed
# instructions; selected 32%, wait 26%, not_selected 16%.
set -u
start=$(date +%s)
mkdir -p .carry/bin $OUT/ncu
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
for v in base act; do
  unxz .carry/z39/$v.xz .carry/bin/$v
  rep=$OUT/ncu/$v
  timeout 200 ncu --clock-control none -k regex:sm90_rsws_gemm --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --import-source no -f -o $rep \
    .carry/bin/$v bench --model qwen3-235b --tokens 16384 --iters 1 --warmup 0 --sets 1 --copies 1 --no-check \
    --no-ceilings --no-baseline > $rep.log 2>&1
  echo "ncu $v rc=$? t=$(( $(date +%s) - start ))"
  ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep-src.csv 2>>$rep.log
  ncu --import $rep.ncu-rep --page details --csv > $rep-details.csv 2>>$rep.log
  python3 scripts/ncu_source_top.py $rep-src.csv --top 5 --regions 2>&1 | tail -6
  rm -f $rep.ncu-rep; xz -9 $rep-src.csv
done
# GEMM 2's 128-token kernel on base (the 4th rsws launch of the forward at this T: GEMM 1's main
# and two narrow launches come first, v28 --nodes): the producer's idle share, for the fused
# combine lead (v28 §7.2).
rep=$OUT/ncu/base-gemm2
timeout 200 ncu --clock-control none -k regex:sm90_rsws_gemm --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats --import-source no -f -o $rep \
  .carry/bin/base bench --model qwen3-235b --tokens 16384 --iters 1 --warmup 0 --sets 1 --copies 1 --no-check \
  --no-ceilings --no-baseline > $rep.log 2>&1
echo "ncu base gemm2 rc=$? t=$(( $(date +%s) - start ))"
ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep-src.csv 2>>$rep.log
head -c 300 $rep-src.csv | tr ',' '\n' | sed -n 2p  # the kernel's name: check it is GEMM 2's <16, false, ...>
python3 scripts/ncu_source_top.py $rep-src.csv --top 5 --regions 2>&1 | tail -6
rm -f $rep.ncu-rep; xz -9 $rep-src.csv

# v29: more A/B rounds of base vs act (epi-act), one process per point, while time is left:
# call 1's control (gpt-oss-120b, identical SASS in both) moved 1.1%, so per-process noise is ~1%.
mkdir -p $OUT/ab
r=0
while [ $(( $(date +%s) - start )) -lt 530 ]; do
  r=$((r + 1))
  for v in base act; do
    for m in qwen3-235b gpt-oss-120b; do
      timeout 30 .carry/bin/$v bench --model $m --tokens 16384 --iters 40 --no-check --no-baseline --no-ceilings \
        > $OUT/ab/$v-$m-r$r.txt 2>&1
    done
  done
done
cd $OUT && grep -H "^ *16384" ab/*.txt | awk '{print $1, $3}' | sort && tar czf ncu.tgz ncu ab && rm -rf ncu ab
