#!/usr/bin/env bash
# Prepared in v29 for the next session (carry [".carry/z42"], ~560 s, after prepared-fc.sh): the fused combine's nodes and A/B.
# Binaries built here (sm_90a, static cudart): main = main's kernels (f5212ed's SASS); fc1 =
# branch fused-combine 276923e (2 buffers of 8 KiB, 8 stages); fc2 = branch fused-combine2
# (4 buffers, 3 of them in the last stage: GEMM 2's 128-token kernels run 7 stages; the slot
# rows queued with the tile); fc2_tests = fc2's test binary.
# 1. fc2's new tests (the fused combine against the combine kernel's bits; the combine's
#    skipping of flagged tiles), then under memcheck and racecheck;
# 2. fc2's whole test binary, EP apart, 8 shards;
# 3. a --check run of fc2 fused; the graph's nodes in place, fc2 off and on;
# 4. the A/B, one process per point, alternated: main; fc1 on; fc2 off
#    (FP4MOE_FUSED_COMBINE=0: only the 7 stages); fc2 count (FP4MOE_FUSED_COMBINE_ENGINE=0:
#    GEMM 2 counts, combines nothing); fc2 on. qwen3-30b and qwen3-235b, T = 16384.
set -u
start=$(date +%s)
ok() { [ $(( $(date +%s) - start )) -lt $1 ]; }
mkdir -p .carry/bin $OUT/ab
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
for v in main fc1 fc2; do unxz .carry/z42/$v.xz .carry/bin/$v; done
for v in off on; do
  ok 100 || break
  if [ $v = off ]; then export FP4MOE_FUSED_COMBINE=0; else unset FP4MOE_FUSED_COMBINE; fi
  timeout 50 .carry/bin/fc2 bench --model qwen3-235b --tokens 16384 --iters 20 --no-check --no-baseline --no-ceilings \
    --nodes > $OUT/ab/nodes-$v.txt 2>&1
  echo "nodes $v rc=$? t=$(( $(date +%s) - start ))"
done
r=0
while ok 460; do
  r=$((r + 1))
  for v in main fc1-on fc2-off fc2-count fc2-on; do
    for m in qwen3-30b qwen3-235b; do
      ok 575 || break
      unset FP4MOE_FUSED_COMBINE FP4MOE_FUSED_COMBINE_ENGINE
      case $v in *-off) export FP4MOE_FUSED_COMBINE=0 ;; *-count) export FP4MOE_FUSED_COMBINE_ENGINE=0 ;; esac
      timeout 30 .carry/bin/${v%%-*} bench --model $m --tokens 16384 --iters 40 --no-check --no-baseline \
        --no-ceilings > $OUT/ab/$v-$m-r$r.txt 2>&1
    done
  done
done
unset FP4MOE_FUSED_COMBINE FP4MOE_FUSED_COMBINE_ENGINE
cd $OUT && grep -H "^ *16384" ab/*-r*.txt | awk '{print $1, $3}' | sort && tar czf ab.tgz ab && rm -rf ab
