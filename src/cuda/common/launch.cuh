// One kernel launch, optionally as a programmatic dependent (PDL, sm_90+) of the kernel before
// it on the stream: the kernel may then start once that kernel's CTAs have all triggered
// (ptx::grid_dependency_trigger) or ended, and must wait for it (ptx::grid_dependency_wait)
// before reading anything it or an earlier kernel wrote. Under stream capture the dependency
// becomes a programmatic graph edge. Failures throw, as every launch's (check.hpp).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/common/check.hpp"

namespace fp4moe::cuda {

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, bool dependent,
                   cudaStream_t stream, Args&&... args) {
  if (!dependent) {
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    FP4MOE_CUDA_CHECK_LAUNCH();
    return;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  FP4MOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace fp4moe::cuda
