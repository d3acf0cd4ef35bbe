// GEMM 2's launch of the fast path (gemm_sm80_kernel.cuh); GEMM 1's is in gemm_sm80.cu.
#include "cuda/gemm_sm80_kernel.cuh"

namespace fp4moe::cuda {

void sm80_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const Gemm80Problem pb{a.rows.rows_bound, cw.w2.num_experts, cw.w2.N, cw.w2.K};
  const Gemm80Config c = choose_config(pb, sm80_token_tile());
  sm80::log_choice("gemm2", pb, c);
  if (c.grid_y == 0) return;
  sm80::Params p = sm80::base_params(cw.w2, a.rows, a.a_bf16, a.a_fp4, a.a_scale, a.a_dq, c.tiles);
  p.epi.y = a.y;
  if (a.a_fp4) sm80::launch<true, false>(c, p, stream);
  else sm80::launch<false, false>(c, p, stream);
}

}  // namespace fp4moe::cuda
