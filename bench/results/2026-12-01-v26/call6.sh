#!/usr/bin/env bash
# v26 call 6: the whole test binary, EP apart, in 8 shards, on the epilogue change with
# 8-column chunks (c8, z32; the bf16 rounding sweep over all 2^32 patterns included).
set -u
start=$(date +%s)
mkdir -p .carry/bin
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z32/fp4moe_tests.xz .carry/bin/fp4moe_tests && chmod +x .carry/bin/fp4moe_tests
OUT=$OUT/tests TESTS_SHARDS=8 TESTS_FILTER='-*Ep*' TESTS_TIMEOUT=200 bash scripts/gpu_suite.sh tests 2>&1 | tail -12
grep -h "Bf16Rounding\|MidRoute" $OUT/tests/tests-*.log | head -4
echo "t=$(( $(date +%s) - start ))"
cd $OUT && tar czf tests.tgz tests && rm -rf tests
