// What this build compiled in and which CUDA devices it sees. Never throws on a CUDA
// failure: a machine without a usable driver reports 0 devices.
#include <cstdio>

#include "backend.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace fp4moe {

BuildInfo build_info() {
  BuildInfo b;
  b.version = version();
  try {
    b.cpu_simd = detail::cpu_simd_level();
  } catch (const Error& e) {
    b.cpu_simd = std::string("unusable: ") + e.what();
  }
#if defined(FP4MOE_WITH_CUDA)
  // FP4MOE_CUDA_ARCH_LIST: "sm_80,sm_90a,sm_100,compute_100" (set by CMake)
  const std::string list = FP4MOE_CUDA_ARCH_LIST;
  for (size_t begin = 0; begin < list.size();) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    if (end > begin) b.cuda_archs.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no pending error for the caller's next CUDA call
    return b;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      (void)cudaGetLastError();
      b.cuda_devices.clear();
      return b;
    }
    char s[384];
    std::snprintf(s, sizeof s, "%s (sm_%d%d, %d SMs, %.0f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                  double(p.totalGlobalMem) / double(1ull << 30));
    b.cuda_devices.push_back(s);
  }
  b.cuda_device_count = n;
#endif
  return b;
}

}  // namespace fp4moe
