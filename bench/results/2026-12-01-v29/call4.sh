#!/usr/bin/env bash
# v29 call 4 (carry [".carry/z41"]): the test binary of the final change (kernels' SASS = call 3's
# mxn), with the six new cases of each format with the other's activation (the runtime route),
# plus the width-split tests that force every narrow and wide width on them.
set -u
mkdir -p .carry/bin
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .carry/z41/tests.xz .carry/bin/t
chmod +x .carry/bin/t
timeout 170 .carry/bin/t --gtest_filter='*nvfp4_swiglu*:*mxfp4_silu*:CudaGemmSm90.WidthSplitAtEveryWidth:CudaGemmSm90.WideWidthAtEveryWidth' \
  > $OUT/call4.log 2>&1
echo "rc=$?"
grep -E "^\[  (PASSED|FAILED|  SKIPPED) |FAILED  \]" $OUT/call4.log | tail -15
grep -c "^\[       OK \]" $OUT/call4.log
