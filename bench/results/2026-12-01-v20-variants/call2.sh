#!/usr/bin/env bash
set -u
start=$(date +%s)
Z=.carry/z9
sed -i 's/ok 540/ok 330/' $Z/measure.sh
bash $Z/measure.sh > $OUT/measure.txt 2>&1
gunzip -c $Z/fp4moe_tests.gz > $Z/t && chmod +x $Z/t
left=$(( 570 - ($(date +%s) - start) ))
echo "racecheck budget $left s"
timeout $left compute-sanitizer --tool racecheck --error-exitcode 9 $Z/t --gtest_filter='CudaGemmCases/CudaGemm.MatchesHost/split_partial_nvfp4_sm90' --gtest_brief=1 > $OUT/racecheck.log 2>&1; echo "rc=$?" >> $OUT/racecheck.log
tail -4 $OUT/racecheck.log
cat $OUT/measure.txt | tail -30
cd $OUT && tar czf ab.tgz r
