// GEMM 1's width launches (gemm_sm90_kernel.cuh): rsws4 at the width split's narrow widths and
// rsws at the split's wide widths, in a file of their own. GEMM 1's kernels, with their
// activation epilogues, are most of the wgmma path's build: here half of them, gemm_sm90.cu the
// rest.
#include "cuda/gemm_sm90_kernel.cuh"

namespace fp4moe::cuda {

void sm90_detail::launch_rsws4_narrow_gemm1(int width, dim3 grid, const Params& p, const WeightMaps& maps,
                                            cudaStream_t stream, bool dependent) {
  launch_rsws4_narrow_here<true>(width, grid, p, maps, stream, dependent);
}

void sm90_detail::launch_rsws_wide_gemm1(int width, dim3 grid, const Params& p, const WeightMaps& maps,
                                         cudaStream_t stream, bool dependent) {
  launch_rsws_wide_here<true>(width, grid, p, maps, stream, dependent);
}

std::string sm90_detail::prepare_rsws4_narrow_gemm1() {
  return prepare_rsws4_narrow_here<true>(kNarrowWidthSequence{});
}

std::string sm90_detail::prepare_rsws_wide_gemm1() { return prepare_rsws_wide_here<true>(); }

}  // namespace fp4moe::cuda
