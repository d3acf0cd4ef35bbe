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

// Whether `kernel` may run as a programmatic dependent on `device` (the current device): an
// sm_90+ device running code compiled for sm_90 or later. griddepcontrol is compiled out below
// sm_90 (ptx.cuh), so code from an older target (compute_80 PTX compiled by the driver for an
// H200) would run a dependent without its waits.
template <typename... Params>
bool pdl_capable(void (*kernel)(Params...), int device) {
  int major = 0;
  FP4MOE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return false;
  cudaFuncAttributes attr{};
  FP4MOE_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return attr.ptxVersion >= 90;
}

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
