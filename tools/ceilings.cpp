#include "ceilings.hpp"

#include <algorithm>
#include <cmath>

#include "fp4moe/fp4moe.hpp"
#include "gpu.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include "baseline_kernels.hpp"
#include "cublas.hpp"
#include "cuda/common/check.hpp"
#endif

namespace fp4moe::cli {
namespace {

constexpr size_t kCopyBytes = size_t(2) << 30;  // 2 GiB: far past L2, so the copy streams HBM
constexpr int kGemmN = 8192;                     // large enough that cuBLAS reaches its peak rate
constexpr int kWarmup = 3;
constexpr double kGemmSustainS = 1.0;            // back-to-back products before the sustained timing

#if defined(FP4MOE_WITH_CUDA)
void measure_copy(int device, int iters, Ceilings* c) {
  size_t free_b = 0, total_b = 0;
  if (!cuda_mem_info(device, &free_b, &total_b)) {
    c->note += "copy: cudaMemGetInfo failed; ";
    return;
  }
  // Two buffers, at most 2 GiB each, at most a third of free memory together.
  size_t bytes = std::min(kCopyBytes, free_b / 6) / 4096 * 4096;
  if (bytes < (size_t(256) << 20)) {
    c->note += "copy: under 512 MiB of GPU memory free, not measured; ";
    return;
  }
  if (bytes < kCopyBytes) c->note += "copy: " + std::to_string(bytes >> 20) + " MiB instead of 2 GiB (memory); ";
  Buffer src(DeviceType::cuda, device, bytes), dst(DeviceType::cuda, device, bytes);
  src.fill(0x5A);
  std::string note;
  // Three ways, each warmed up for ~0.1 s (clocks ramp from idle): cudaMemcpyAsync, a
  // 16-byte-vector copy kernel over all SMs, and the same with eight loads in flight per
  // thread and evict-first hints. The fastest one is the ceiling. cudaMemcpyAsync is timed on
  // the stream, not in a graph: in a graph it becomes a node for the copy engines, 2.7 TB/s on
  // the H200 where the driver's copy kernel reaches 4.25 (v51; until then this ceiling was
  // the streaming kernel's 3.94).
  int sms = 0;
  FP4MOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int warm = std::max(kWarmup, int((size_t(200) << 30) / (2 * bytes)));
  std::vector<double> memcpy_us = time_cuda(device, 1, [&](int, void* stream) {
    FP4MOE_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(stream)));
  }, warm, iters, &note, nullptr, 1, 0, /*capture=*/false);
  std::vector<double> kernel_us = time_cuda(device, 1, [&](int, void* stream) {
    FP4MOE_CUDA_CHECK(kernels::copy16(src.data(), dst.data(), bytes / 16, sms, static_cast<cudaStream_t>(stream)));
  }, warm, iters, &note);
  std::vector<double> streaming_us = time_cuda(device, 1, [&](int, void* stream) {
    FP4MOE_CUDA_CHECK(
        kernels::copy16_streaming(src.data(), dst.data(), bytes / 16, sms, static_cast<cudaStream_t>(stream)));
  }, warm, iters, &note);
  auto rate = [&](const std::vector<double>& us) { return 2.0 * double(bytes) / (median(us) * 1e-6); };
  c->copy_memcpy_bytes_per_s = rate(memcpy_us);
  c->copy_kernel_bytes_per_s = rate(kernel_us);
  c->copy_streaming_bytes_per_s = rate(streaming_us);
  c->copy_us = memcpy_us;
  c->copy_how = "cudaMemcpyAsync";
  if (median(kernel_us) < median(c->copy_us)) c->copy_us = kernel_us, c->copy_how = "copy kernel";
  if (median(streaming_us) < median(c->copy_us)) c->copy_us = streaming_us, c->copy_how = "streaming copy kernel";
  if (!note.empty()) c->note += "copy: " + note + "; ";
  c->copy_bytes = bytes;
  c->copy_bytes_per_s = rate(c->copy_us);
  c->copy_ok = true;
}

void measure_gemm(int device, int iters, Ceilings* c) {
  std::string why;
  const CublasApi* api = load_cublas(&why);
  if (!api) {
    c->note += "GEMM: " + why + "; ";
    return;
  }
  c->cublas = api->library + " " + std::to_string(api->version);
  const size_t n = kGemmN, elems = n * n;
  size_t free_b = 0, total_b = 0;
  if (!cuda_mem_info(device, &free_b, &total_b) || free_b < 4 * elems * 2) {
    c->note += "GEMM: not enough GPU memory for 8192^3; ";
    return;
  }
  Buffer a(DeviceType::cuda, device, elems * 2), b(DeviceType::cuda, device, elems * 2),
      d(DeviceType::cuda, device, elems * 2);
  FP4MOE_CUDA_CHECK(kernels::fill_random_bf16(static_cast<uint16_t*>(a.data()), elems, 11, nullptr));
  FP4MOE_CUDA_CHECK(kernels::fill_random_bf16(static_cast<uint16_t*>(b.data()), elems, 12, nullptr));
  FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
  CublasHandle h(*api, device);
  const float alpha = 1.0f, beta = 0.0f;
  std::string note;
  // D (n, n) bf16 = A (n, n) bf16 x B (n, n) bf16, fp32 accumulation: the tensor-core rate
  // that a bf16 MoE's GEMMs can at best reach.
  auto product = [&](int, void* stream) {
    h.bind(static_cast<cudaStream_t>(stream));
    check_cublas(api->gemm_ex(h.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(n), int(n), &alpha, a.data(),
                              CUDA_R_16BF, int(n), b.data(), CUDA_R_16BF, int(n), &beta, d.data(), CUDA_R_16BF,
                              int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx(8192^3 bf16)");
  };
  c->gemm_us = time_cuda(device, 1, product, kWarmup, iters, &note);
  if (!note.empty()) c->note += "GEMM: " + note + "; ";
  c->gemm_n = int(n);
  const double flops = 2.0 * double(n) * double(n) * double(n);
  c->gemm_flops_per_s = flops / (median(c->gemm_us) * 1e-6);
  c->gemm_ok = true;
  // Sustained: the warm-up alone runs ~kGemmSustainS back to back, then the timed products.
  const int warm = int(std::ceil(kGemmSustainS / (median(c->gemm_us) * 1e-6)));
  note.clear();
  c->gemm_sustained_us = time_cuda(device, 1, product, warm, iters, &note);
  if (!note.empty()) c->note += "sustained GEMM: " + note + "; ";
  c->gemm_sustained_warm_s = warm * median(c->gemm_us) * 1e-6;
  c->gemm_sustained_flops_per_s = flops / (median(c->gemm_sustained_us) * 1e-6);
  c->gemm_sustained_ok = true;
}
#endif

}  // namespace

Ceilings measure_ceilings(int device, int iters) {
  Ceilings c;
#if defined(FP4MOE_WITH_CUDA)
  // The GEMM first: it brings the clocks up from idle before the copy is timed.
  try {
    measure_gemm(device, iters, &c);
  } catch (const std::exception& e) {
    c.gemm_ok = false;
    c.note += std::string("GEMM failed: ") + e.what() + "; ";
  }
  try {
    measure_copy(device, iters, &c);
  } catch (const std::exception& e) {
    c.copy_ok = false;
    c.note += std::string("copy failed: ") + e.what() + "; ";
  }
  while (!c.note.empty() && (c.note.back() == ' ' || c.note.back() == ';')) c.note.pop_back();
#else
  c.note = "this build has no CUDA";
#endif
  return c;
}

}  // namespace fp4moe::cli
