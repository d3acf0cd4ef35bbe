#!/usr/bin/env bash
# v67 call 2 (carry [".carry/mn67"]: main 59472f6's fp4moe_tests and fp4moe, sm_90a, stripped,
# xz; the cp312 sm_90a wheel of fb60013; bench/probes/pointer_attrs built with nvcc): the data-pointer check
# of every CUDA tensor (expect_device_pointers) on the H200. The probe first (its cost per call
# and whether it may run under graph capture, torch's global mode included), then the new tests
# and the API / format / prepare ones, then the whole suite in 8 shards, EP apart, bench --check at
# three points, memcheck / racecheck of the new layer test, and pytest from the wheel (its CUDA graph test captures in torch's global mode).
# ~480 s.
set -u
source scripts/device_lib.sh
chmod +x .carry/mn67/pointer_attrs
.carry/mn67/pointer_attrs > "$OUT/pointer_attrs.txt" 2>&1; echo "probe rc=$?"
cat "$OUT/pointer_attrs.txt"
unxz .carry/mn67/tests.xz .carry/bin/fp4moe_tests || exit 1
unxz .carry/mn67/cli.xz .carry/bin/fp4moe || exit 1
ln -sf fp4moe .carry/bin/fp4moe_main
filter_tests 'CudaLayer.ForwardTakes*:ApiValidate.*:ApiRoute*:FormatTensor.*:PrepareTensor.*:CudaFormat*' pointer-tests 120
grep -E "ForwardTakes|MemoryLabelled" "$OUT/pointer-tests.txt" | head -8
sanitizers 'CudaLayer.ForwardTakes*' 90
suite_shards
check_points main "kimi-k2:w4a16:1,32 deepseek-v3:w4a4:2048 qwen3-30b:w4a16:8192"
pytest_wheel .carry/mn67/*.whl 240
echo "t=$(( $(date +%s) - start ))"
