#!/usr/bin/env bash
# v54 call 1 (carry [".carry/t54", ".carry/l16t"]: main 5d51ead's and branch live16's test
# binaries, sm_90a, stripped; timeout_s 500). Main's whole test binary, EP apart (the 13 GPU cases
# added in v53 not yet run on a GPU among them), then live16's (the same tests; its kernels).
set -u
source scripts/device_lib.sh
unxz .carry/t54/tests.xz .carry/bin/fp4moe_tests
.carry/bin/fp4moe_tests --gtest_list_tests --gtest_filter='Table/CudaLayerConformance.*:*whole_k*' | grep -c "^  " \
  | sed 's/^/listed (conformance + whole-K): /'
suite_shards
mv $OUT/suite-summary.txt $OUT/suite-main.txt; mv $OUT/suite.tgz $OUT/suite-main.tgz
unxz .carry/l16t/tests.xz .carry/bin/fp4moe_tests
ok 400 && suite_shards
mv $OUT/suite-summary.txt $OUT/suite-live16.txt; mv $OUT/suite.tgz $OUT/suite-live16.tgz
echo "t=$(( $(date +%s) - start ))"
