#!/usr/bin/env bash
# v26 call 4: ncu source counters of the rsws kernels (GEMM 1 and GEMM 2 of one forward,
# qwen3-235b T = 16384, W4A16; exp-bounds build at FP4MOE_EXP=0, main's code): where the
# epilogue's time goes (call 3: without GEMM 1's epilogue the layer is 12.6% faster).
set -u
start=$(date +%s)
Z=.carry/z30; mkdir -p .carry/bin $OUT/ncu
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $Z/fp4moe.xz .carry/bin/fp4moe && chmod +x .carry/bin/fp4moe
rep=$OUT/ncu/qwen-16384
timeout 200 ncu --clock-control none -k regex:sm90_rsws_gemm --launch-count 2 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight --section SchedulerStats \
  --import-source no -f -o $rep \
  .carry/bin/fp4moe bench --model qwen3-235b --tokens 16384 --iters 1 --warmup 0 --sets 1 --copies 1 --no-check \
  --no-ceilings --no-baseline > $rep.log 2>&1
echo "ncu rc=$? t=$(( $(date +%s) - start ))"
ncu --import $rep.ncu-rep --page details --csv > $rep-details.csv 2>>$rep.log
ncu --import $rep.ncu-rep --page source --print-source sass --csv > $rep-src.csv 2>>$rep.log
for id in 0 1; do
  ncu --import $rep.ncu-rep --page source --print-source sass --csv --launch-skip $id --launch-count 1 > $rep-src$id.csv 2>>$rep.log
done
echo "export t=$(( $(date +%s) - start ))"
ls -la $OUT/ncu
python3 scripts/ncu_source_top.py $rep-src0.csv --top 12 2>&1 | head -60
rm -f $rep.ncu-rep
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
