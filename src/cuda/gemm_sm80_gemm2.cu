// GEMM 2's launch of the fast path (gemm_sm80_kernel.cuh); GEMM 1's is in gemm_sm80.cu, the
// kernels with NVFP4 activations in gemm_sm80_gemm{1,2}_fp4a.cu.
#include "cuda/gemm_sm80_kernel.cuh"

namespace fp4moe::cuda {

bool sm80_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const Gemm80Problem pb{a.rows.rows_bound, cw.w2.num_experts, cw.w2.N, cw.w2.K};
  const Gemm80Config c = choose_config(pb, sm80_token_tile());
  sm80::log_choice("gemm2", pb, c);
  if (c.grid_y == 0) return false;
  sm80::Params p = sm80::base_params(cw.w2, a.rows, a.a_bf16, a.a_fp4, a.a_scale, a.a_dq, c.tiles);
  p.epi.y = a.y;
  // as the dependent of the kernel before it where the rows were complete before that kernel
  // let it start (Gemm2Args::rows_settled): it reads them and its first weights before waiting
  const bool pdl = sm80_pdl(cw.device);
  const bool dependent = a.rows_settled && pdl;
  if (a.a_fp4) sm80::launch_gemm2_fp4a(c, p, dependent, stream);
  else sm80::launch<false, false>(c, p, dependent, stream);
  return pdl;  // the kernel lets its dependents start at once; they wait for its completion
}

}  // namespace fp4moe::cuda
