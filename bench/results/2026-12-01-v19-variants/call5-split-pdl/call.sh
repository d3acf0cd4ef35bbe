#!/usr/bin/env bash
# Call 5 (one H200): the split's launches as programmatic dependents (branch sm90-split-pdl) - tests, then the A/B.
set -u
start=$(date +%s)
Z=.carry/za; R=$OUT/r; mkdir -p $R/ab
gunzip -c $Z/fp4moe_tests.gz > $Z/t && gunzip -c $Z/fp4moe.gz > $Z/b && chmod +x $Z/t $Z/b
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
timeout 75 $Z/t --gtest_filter='CudaGemmSm90.*Width*:CudaGemmCases/CudaGemm.MatchesHost/*split*sm90' > $R/tests.log 2>&1; echo "rc=$?" >> $R/tests.log
echo "t=$(( $(date +%s) - start )) s after tests"
run() {  # model tokens variant pdl
  ok 150 || return
  FP4MOE_SM90_PDL=$4 timeout 40 $Z/b bench --model $1 --tokens $2 --iters 100 --no-check --no-baseline --no-ceilings > $R/ab/$1-$3-1.txt 2>&1
}
run deepseek-v3 512,2048 pdl 1; run deepseek-v3 512,2048 main 0
run kimi-k2 2048,4096 main 0; run kimi-k2 2048,4096 pdl 1
echo "t=$(( $(date +%s) - start )) s"
grep -E "FAILED|PASSED|rc=" $R/tests.log | head
cd $R/ab && for f in *; do printf "%-28s %s\n" $f "$(grep -E '^ +[0-9]+ ' $f | awk '{printf "%s:%s ", $1, $2}')"; done
cd $OUT && tar czf r.tgz r && rm -rf r
