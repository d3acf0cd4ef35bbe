#include "cuda/common/device.hpp"

#include <cuda_runtime.h>

#include "cuda/pipeline.hpp"

#ifndef FP4MOE_CUDA_ARCH_LIST
#define FP4MOE_CUDA_ARCH_LIST "unknown"
#endif

namespace fp4moe::cuda {
namespace {

std::string error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no sticky error for the next caller
    return 0;
  }
  return n;
}

std::string why_no_device(int device) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
    (void)cudaGetLastError();
    return "no CUDA device";
  }
  if (err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return "no usable CUDA driver (" + error_text(err) + ")";
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return "the CUDA runtime cannot start (" + error_text(err) + ")";
  }
  if (device < 0 || device >= n)
    return "CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " visible)";
  return "";
}

namespace {

// What the kernels of `device` cannot do with the byte at `p` ("" when they can read and write
// it), with `device` current. One cudaPointerGetAttributes call; leaves no sticky error.
std::string why_not_reachable(const void* p, int device) {
  cudaPointerAttributes at{};
  if (const cudaError_t err = cudaPointerGetAttributes(&at, p); err != cudaSuccess) {
    (void)cudaGetLastError();
    return "a pointer the CUDA runtime cannot place (" + error_text(err) + ")";
  }
  switch (at.type) {
    case cudaMemoryTypeDevice:
      return at.device == device ? "" : "memory of cuda:" + std::to_string(at.device);
    case cudaMemoryTypeManaged:
      return "";
    case cudaMemoryTypeHost:  // pinned: the kernels take the pointer as it is, so it must be the device's view
      return at.devicePointer == p ? "" : "pinned host memory not mapped at the same address on the device";
    case cudaMemoryTypeUnregistered:
    default: {
      int pageable = 0;
      if (cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device) != cudaSuccess) {
        (void)cudaGetLastError();
        pageable = 0;
      }
      return pageable ? "" : "host memory, not a CUDA allocation";
    }
  }
}

}  // namespace

std::string why_not_device_memory(const void* p, size_t bytes, int device) {
  // The queries run in the current device's context, and would create one there: they ask with
  // `device` current, whose context the kernels (or prepare's copy) use anyway.
  int prev = -1;
  cudaError_t err = cudaGetDevice(&prev);
  if (err == cudaSuccess && prev != device) err = cudaSetDevice(device);
  std::string why;
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    why = "a pointer the CUDA runtime cannot place (" + error_text(err) + ")";
  } else {
    why = why_not_reachable(p, device);
    if (why.empty() && bytes > 1) {
      const size_t last = bytes - 1;
      const std::string at_last = why_not_reachable(static_cast<const char*>(p) + last, device);
      if (!at_last.empty())
        why = "it runs past its allocation: its last byte, " + std::to_string(last) + " bytes on, is " + at_last;
    }
  }
  if (prev >= 0 && prev != device) (void)cudaSetDevice(prev);
  return why;
}

int compute_capability(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return major * 10 + minor;
}

int multiprocessor_count(int device) {
  int n = 0;
  FP4MOE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

const char* compiled_archs() { return FP4MOE_CUDA_ARCH_LIST; }

std::string why_no_kernel_image(int device) {
  if (std::string why = why_no_device(device); !why.empty()) return why;
  int prev = 0;
  if (cudaError_t err = cudaGetDevice(&prev); err != cudaSuccess) {
    (void)cudaGetLastError();
    return "cudaGetDevice failed (" + error_text(err) + ")";
  }
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    (void)cudaGetLastError();
    return "cudaSetDevice(" + std::to_string(device) + ") failed (" + error_text(err) + ")";
  }
  const cudaError_t err = probe_kernel_image();
  (void)cudaGetLastError();
  (void)cudaSetDevice(prev);
  if (err == cudaSuccess) return "";
  const int cc = compute_capability(device);
  if (err == cudaErrorInvalidDeviceFunction || err == cudaErrorNoKernelImageForDevice)
    return "no kernel image for sm_" + std::to_string(cc) + " in this build (compiled: " + compiled_archs() + ")";
  return "CUDA device " + std::to_string(device) + " (sm_" + std::to_string(cc) + ") cannot run this build's kernels (" +
         error_text(err) + ")";
}

}  // namespace fp4moe::cuda
