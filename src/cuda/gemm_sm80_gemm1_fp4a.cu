// GEMM 1's fast-path kernels with NVFP4 activations (W4A4) and their launch
// (gemm_sm80_kernel.cuh), apart from the bf16 ones so that each file compiles in about a minute.
#include "cuda/gemm_sm80_kernel.cuh"

namespace fp4moe::cuda::sm80 {

void launch_gemm1_fp4a(const Gemm80Config& c, const Params& p, bool dependent, cudaStream_t stream) {
  launch<true, true>(c, p, dependent, stream);
}

}  // namespace fp4moe::cuda::sm80
