// Combine and batched writeback (pipeline.hpp): fp32 GEMM-2 rows -> the caller's out.
//
// Combine is the reference's loop order exactly (src/reference/reference.cpp):
//   acc = 0; for j in 0..k-1 with a valid slot: acc = acc + w_j * y_j   (two roundings)
//   out = round_out(accumulate ? out + acc : acc)
// written with __fmul_rn/__fadd_rn so nvcc cannot contract it into an fma. One thread
// owns 4 consecutive columns of one token; nothing is shared, so the result does not
// depend on scheduling.
#include <cstdint>

#include "cuda/common/check.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/out_cols.cuh"
#include "cuda/pipeline.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kCols = kOutCols;  // columns per thread; H % 16 == 0 so rows hold whole groups

__device__ __forceinline__ void load4(const float* p, float (&v)[kCols]) {
  const float4 q = *reinterpret_cast<const float4*>(p);  // y rows are 16-byte aligned
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
}

struct CombineKernelArgs {
  const float* y;
  const int32_t* slot_row;
  const float* w;  // (T, k) or nullptr
  int64_t T, k, H;
  void* out;
  int dt;
  int64_t out_stride;
  size_t esize;
  bool accumulate;
};

// Slots per batch: their rows, weights and y loads are all issued before the first add, so
// a token's k slots cost about two memory latencies, not 2k (at T = 1 the kernel is that
// chain: ncu measured 6.1 us on kimi-k2, k = 8). The adds keep slot order.
constexpr int kSlotBatch = 8;

// grid (T, ceil(H / (4 * kThreads)))
__global__ void __launch_bounds__(kThreads) combine_kernel(CombineKernelArgs a) {
  ptx::grid_dependency_wait();  // for GEMM 2 when launched as its dependent (CombineArgs::dependent)
  const int64_t t = blockIdx.x;
  const int64_t c = (int64_t(blockIdx.y) * kThreads + threadIdx.x) * kCols;
  if (c >= a.H) return;
  float acc[kCols] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t j0 = 0; j0 < a.k; j0 += kSlotBatch) {
    int32_t row[kSlotBatch];
    float wj[kSlotBatch], y[kSlotBatch][kCols];
#pragma unroll
    for (int b = 0; b < kSlotBatch; ++b) {
      const int64_t j = j0 + b;
      row[b] = j < a.k ? a.slot_row[t * a.k + j] : -1;  // -1: no expert or not local, contributes exactly 0
      wj[b] = j < a.k && a.w ? a.w[t * a.k + j] : 1.0f;
    }
#pragma unroll
    for (int b = 0; b < kSlotBatch; ++b)
      if (row[b] >= 0) load4(a.y + int64_t(row[b]) * a.H + c, y[b]);
#pragma unroll
    for (int b = 0; b < kSlotBatch; ++b) {
      if (row[b] < 0) continue;
#pragma unroll
      for (int i = 0; i < kCols; ++i) acc[i] = __fadd_rn(acc[i], __fmul_rn(wj[b], y[b][i]));
    }
  }
  void* o = static_cast<char*>(a.out) + size_t(t * a.out_stride + c) * a.esize;
  if (a.accumulate) {
    float old[kCols];
    read_out(o, a.dt, old);
#pragma unroll
    for (int i = 0; i < kCols; ++i) acc[i] = __fadd_rn(old[i], acc[i]);
  }
  write_out(o, a.dt, acc);
}

// grid (E_local * M, ceil(H / (4 * kThreads))); rows past their expert's count untouched.
// y and count without __restrict__: read-only loads (ld.global.nc) may be moved above
// grid_dependency_wait, and y is the output of the grid this one may run beside.
__global__ void __launch_bounds__(kThreads) writeback_kernel(const float* y, const int32_t* count, int64_t M,
                                                             int64_t H, void* out, int dt, size_t esize) {
  ptx::grid_dependency_wait();  // as in combine_kernel
  const int64_t row = blockIdx.x;
  const int64_t c = (int64_t(blockIdx.y) * kThreads + threadIdx.x) * kCols;
  if (c >= H) return;
  if (row % M >= int64_t(count[row / M])) return;
  float v[kCols];
  load4(y + row * H + c, v);
  write_out(static_cast<char*>(out) + size_t(row * H + c) * esize, dt, v);
}

}  // namespace

void combine(const CombineArgs& a, cudaStream_t stream) {
  if (a.T <= 0 || a.H <= 0) return;
  if (a.H % kCols != 0) detail::fail_arg("combine: H: got " + std::to_string(a.H) + ", need a multiple of 4");
  CombineKernelArgs k{a.y, a.slot_row, a.topk_weights, a.T, a.k, a.H, a.out, value_dtype_code(a.out_dtype, "out"),
                      a.out_stride, dtype_size(a.out_dtype), a.accumulate};
  const dim3 grid(unsigned(a.T), unsigned((a.H + kCols * kThreads - 1) / (kCols * kThreads)));
  launch_kernel(combine_kernel, grid, dim3(kThreads), 0, a.dependent, stream, k);
}

void batched_writeback(const float* y, const int32_t* count, int64_t num_local, int64_t M, int64_t H, void* out,
                       DType out_dtype, bool dependent, cudaStream_t stream) {
  const int64_t rows = num_local * M;
  if (rows <= 0 || H <= 0) return;
  if (H % kCols != 0) detail::fail_arg("batched out: H: got " + std::to_string(H) + ", need a multiple of 4");
  const dim3 grid(unsigned(rows), unsigned((H + kCols * kThreads - 1) / (kCols * kThreads)));
  launch_kernel(writeback_kernel, grid, dim3(kThreads), 0, dependent, stream, y, count, M, H, out, value_dtype_code(out_dtype, "out"),
                dtype_size(out_dtype));
}

}  // namespace fp4moe::cuda
