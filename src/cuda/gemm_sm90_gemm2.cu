// GEMM 2 of the wgmma path (gemm_sm90_kernel.cuh); GEMM 1, the config and the device check are in
// gemm_sm90.cu.
#include "cuda/gemm_sm90_kernel.cuh"

namespace fp4moe::cuda {

std::string sm90_detail::prepare_gemm2() { return prepare_gemm<false>(); }

// GEMM 2 on bf16 A (h).
bool sm90_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const Sm90Config c = plan("gemm2", cw, cw.w2, a.rows, a.a_fp4 != nullptr, a.a_fp4 ? kUnstagedA : "");
  if (!c.use) return false;
  Params p = base_params(c, cw.w2, a.rows, a.a_bf16, a.a_dq);
  p.epi.y = a.y;
  launch<false>(c, p, cw.device, stream);
  return true;
}

}  // namespace fp4moe::cuda
