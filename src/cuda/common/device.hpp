// Arch queries for the CUDA backend: what devices are visible and whether this build
// carries a kernel image they can run. None of these throw: they answer the backend
// selection ladder, which must work on machines without a GPU or driver.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "cuda/common/check.hpp"

namespace fp4moe::cuda {

// Visible CUDA devices; 0 when there is no driver or no device.
int device_count();

// "" when the CUDA runtime works and `device` exists, else why not ("no CUDA device",
// or the runtime's error name and string).
std::string why_no_device(int device);

// "" when `device` can run this build's kernels, else why not:
// "no kernel image for sm_XY in this build (compiled: sm_80,sm_90a,...)".
// Probes with cudaFuncGetAttributes on a pipeline kernel; restores the current device.
std::string why_no_kernel_image(int device);

// "" when the kernels of `device` can read and write the `bytes` bytes at `p`: the first and
// the last of them each in an allocation of that device, managed memory, mapped pinned host
// memory, or, where the device reads pageable host memory (cudaDevAttrPageableMemoryAccess: HMM
// or ATS), any host memory; else what it is instead ("host memory, not a CUDA allocation",
// "memory of cuda:1", "it runs past its allocation: its last byte, N bytes on, is ..."). Never
// throws and leaves no sticky error: the public entries' argument check of every CUDA tensor
// (validate.cpp), so that a host buffer labelled cuda, or a view longer than what is mapped
// there, fails naming its argument, not in a kernel that would break the context. Two
// cudaPointerGetAttributes calls (host-side lookups, no device round trip). It sees the two
// ends only: a view that runs from its allocation into a neighbouring one of the same device
// passes.
std::string why_not_device_memory(const void* p, size_t bytes, int device);

// Compute capability as major * 10 + minor, or -1 when it cannot be read.
int compute_capability(int device);

// The number of SMs of `device` (throws, FP4MOE_CUDA_CHECK, when it cannot be read).
int multiprocessor_count(int device);

// The -gencode list this build was compiled with, e.g. "sm_80,sm_90a,sm_100,compute_100".
const char* compiled_archs();

// Makes `device` current for a scope and restores the previous one. Unlike the queries
// above it throws (FP4MOE_CUDA_CHECK) when the device cannot be made current; the
// destructor never throws.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    FP4MOE_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) FP4MOE_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = prev_;
    if (cudaGetDevice(&now) == cudaSuccess && now != prev_) (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

}  // namespace fp4moe::cuda
