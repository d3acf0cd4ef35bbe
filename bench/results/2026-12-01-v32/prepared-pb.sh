#!/usr/bin/env bash
# Prepared in v32 for the next session: branch permute-block (87b71df), the permute in one CTA of
# up to 32 warps for 257..8192 slots (T = 33..1024 at k = 8) in place of a memset node and three
# launches. Carry [".carry/z47"] (its CLI and test binary, sm_90a, built at 87b71df).
#   bash prepared-pb.sh tests   (~250 s): the permute tests, memcheck / racecheck of them, then
#                               the whole test binary (EP apart, 8 shards);
#   bash prepared-pb.sh ab      (~500 s): per-node times, then an A/B of the bounds, alternated:
#     def  = the branch's rule (fused <= 256 slots, block <= 8192);
#     old  = FP4MOE_PERMUTE_BLOCK_SLOTS=0 (main's permute: fused, then memset + 3 launches);
#     b33  = FP4MOE_PERMUTE_FUSED_SLOTS=32 (the block kernel from 33 slots: T = 8 / 32 at k = 8).
# Predicted (ncu times of the three kernels, v13 and permute.cu's header, plus a memset node and
# two launch gaps): -8 to -12 µs wherever the block kernel replaces the three, so about -7% at
# qwen3-30b T = 128, -2.5% at qwen3-235b T = 128, -5% at qwen3-30b T = 512.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
case ${1:-tests} in
  tests)
    unxz .carry/z47/tests.xz .carry/bin/fp4moe_tests
    timeout 60 .carry/bin/fp4moe_tests --gtest_filter='CudaPermute.*' > $OUT/permute.log 2>&1
    echo "permute tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/permute.log | tr '\n' ' ')"
    for tool in memcheck racecheck; do
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 .carry/bin/fp4moe_tests \
        --gtest_filter='CudaPermute.*:CudaLayer.*' --gtest_brief=1 > $OUT/$tool.log 2>&1
      echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
    done
    OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=300 timeout 330 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
    echo "t=$(( $(date +%s) - start ))" ;;
  ab)
    unxz .carry/z47/cli.xz .carry/bin/fp4moe
    mkdir -p $OUT/ab $OUT/nodes
    for v in def old; do
      e=X=1; [ $v = old ] && e=FP4MOE_PERMUTE_BLOCK_SLOTS=0
      env $e timeout 40 .carry/bin/fp4moe bench --model qwen3-30b --tokens 128,512 --iters 20 --no-check --no-baseline --no-ceilings --nodes > $OUT/nodes/$v.txt 2>&1
    done
    r=0
    while ok 420; do
      r=$((r + 1)); chk=--no-check; [ $r = 1 ] && chk=--check
      for v in def old b33; do
        e=X=1; [ $v = old ] && e=FP4MOE_PERMUTE_BLOCK_SLOTS=0; [ $v = b33 ] && e=FP4MOE_PERMUTE_FUSED_SLOTS=32
        for m in qwen3-30b:8,32,64,128,512,1024 qwen3-235b:8,32,128,512 gpt-oss-120b:32,128,512,1024; do
          ok 470 || break 3
          env $e timeout 30 .carry/bin/fp4moe bench --model ${m%%:*} --tokens ${m#*:} --iters 40 $chk --no-baseline --no-ceilings > $OUT/ab/$v-${m%%:*}-r$r.txt 2>&1
        done
      done
    done
    echo "rounds $r t=$(( $(date +%s) - start ))"
    grep -l FAIL $OUT/ab/*.txt; grep -c PASS $OUT/ab/*-r1.txt | tr '\n' ' '; echo
    grep -h "setup:" $OUT/ab/def-*-r1.txt | head -3
    grep -A12 "graph nodes" $OUT/nodes/def.txt | grep -E "permute|graph" | head -6
    grep -A12 "graph nodes" $OUT/nodes/old.txt | grep -E "permute|memset|graph" | head -10
    cd $OUT && for f in ab/*-r*.txt; do b=$(basename $f .txt); v=${b%%-*}; rest=${b#*-}; m=${rest%-r*}; \
      grep -E "^ +[0-9]+ +[0-9.]+ " $f | awk -v v=$v -v m=$m '{print m, $1, v, $2}'; done | sort | \
      awk '{k=$1" "$2" "$3; a[k]=a[k]" "$4} END{for(k in a) print k, a[k]}' | sort -k1,1 -k2,2n -k3,3
    tar czf ab.tgz ab nodes && rm -rf ab nodes ;;
esac
