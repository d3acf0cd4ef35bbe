#!/usr/bin/env bash
# Prepared in v32 (carry [".carry/z48"]: main 366c0c2's CLI and test binary, sm_90a; ~330 s).
# Main since v32's device calls: the preparation fills its weights on every core (HostBytes,
# parallel_copy_rows; host code, tested on the CPU), builds the fragments by table (2.3x on the
# host; every GEMM test checks them through w13's row map), the CUDA backend frees the host copy of the
# weights after the upload (CudaLayer.BackendReleasesTheHostWeights), and the bench times its
# setup. On the GPU:
# the whole test binary (EP apart, 8 shards), then the setup's phases of kimi-k2 and deepseek-v3
# with this preparation against the older one (z47's CLI, branch permute-block, when carried too).
set -u
start=$(date +%s)
mkdir -p .carry/bin
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2 && chmod +x $2; }
unxz .carry/z48/tests.xz .carry/bin/fp4moe_tests
unxz .carry/z48/cli.xz .carry/bin/fp4moe
OUT=$OUT/suite TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=240 timeout 260 bash scripts/gpu_suite.sh tests 2>&1 | tail -9
echo "suite t=$(( $(date +%s) - start ))"
[ -f .carry/z47/cli.xz ] && unxz .carry/z47/cli.xz .carry/bin/fp4moe_z47
for m in kimi-k2 deepseek-v3; do
  for b in fp4moe fp4moe_z47; do
    [ -x .carry/bin/$b ] || continue
    timeout 60 .carry/bin/$b bench --model $m --tokens 1,512 --iters 20 --check --no-baseline --no-ceilings > $OUT/setup-$m-$b.txt 2>&1
    echo "$m $b rc=$? $(grep -h 'setup:' $OUT/setup-$m-$b.txt) $(grep -c PASS $OUT/setup-$m-$b.txt) PASS"
  done
done
echo "t=$(( $(date +%s) - start ))"
