// CUDA error checking for host code: every runtime call goes through FP4MOE_CUDA_CHECK,
// every launch is followed by FP4MOE_CUDA_CHECK_LAUNCH(). Failures throw
// fp4moe::Error(ErrorKind::device) naming the call, file and line; they never abort.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "backend.hpp"

namespace fp4moe::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* what, const char* file, int line) {
  detail::fail(ErrorKind::device, std::string("CUDA error in ") + what + " (" + file + ":" +
                                      std::to_string(line) + "): " + cudaGetErrorName(err) + ": " +
                                      cudaGetErrorString(err));
}

}  // namespace fp4moe::cuda

#define FP4MOE_CUDA_CHECK(call)                                              \
  do {                                                                       \
    cudaError_t fp4moe_err_ = (call);                                        \
    if (fp4moe_err_ != cudaSuccess)                                          \
      ::fp4moe::cuda::throw_cuda(fp4moe_err_, #call, __FILE__, __LINE__);    \
  } while (0)

#define FP4MOE_CUDA_CHECK_LAUNCH() FP4MOE_CUDA_CHECK(cudaGetLastError())
