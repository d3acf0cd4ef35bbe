// Activation preparation for GEMM 1 (pipeline.hpp): bf16 rows (W4A16) or NVFP4 rows
// (W4A4), from f32 | bf16 | f16 inputs. Every value-level step is a format.h call
// (round_bf16, nvfp4_scale_code, nvfp4_inv_scale, e2m1_from_f32), the same lines the
// CPU quantizer runs, so the bytes match detail::nvfp4_quantize_rows exactly.
//
// One thread per 16-element NVFP4 block (or per 8 bf16 outputs): the block's amax is a
// thread-local amax_update chain, the CPU loop's: order-independent, and NaN elements,
// quiet or signalling, do not raise it.
#include <cstdint>

#include "cuda/act_rows.cuh"
#include "cuda/common/check.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/pipeline.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cuda {
namespace {

using act::SrcRows;
using act::load_row;
using act::quantize_block;
using act::row_live;

constexpr int kThreads = 256;

// This thread's NVFP4 block (one thread per block of 16): row r, block b; false past the
// rows or on a row the batched format skips.
__device__ __forceinline__ bool thread_block(const SrcRows& s, int64_t& r, int64_t& b) {
  const int64_t nb = s.K / kNvfp4Block;
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= s.rows * nb) return false;
  r = i / nb;
  b = i % nb;
  return row_live(s, r);
}

// data (rows, K/2), scale (rows, K/16): one thread per block of 16.
__global__ void __launch_bounds__(kThreads) nvfp4_rows_kernel(SrcRows s, float gs, uint8_t* __restrict__ data,
                                                              uint8_t* __restrict__ scale) {
  const int64_t nb = s.K / kNvfp4Block;
  int64_t r, b;
  ptx::grid_dependency_trigger();  // a dependent GEMM 1 waits for this grid's end (decode_pdl)
  if (!thread_block(s, r, b)) return;
  uint32_t lo, hi;
  const uint8_t sc = quantize_block(s, r, b, gs, lo, hi);
  uint8_t* d = data + r * (s.K / 2) + b * (kNvfp4Block / 2);
  if ((reinterpret_cast<uintptr_t>(d) & 7u) == 0) {
    *reinterpret_cast<uint2*>(d) = make_uint2(lo, hi);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      d[j] = uint8_t(lo >> (8 * j));
      d[4 + j] = uint8_t(hi >> (8 * j));
    }
  }
  scale[r * nb + b] = sc;
}

// out (rows, K) bf16, the quantized values e2m1 * e4m3 (nvfp4_value_bf16, exact), without the
// q_scale: what the staging kernel makes of nvfp4_rows_kernel's output, in one pass. One
// thread per block of 16 (32 bytes out; out is 16-byte aligned and K % 16 == 0). KPERM: out
// k-permuted, rows of kperm_row(K) with zeros past K (gemm_internal.hpp kperm_index: the
// wgmma kernels' A), a thread per block of those rows.
template <bool KPERM>
__global__ void __launch_bounds__(kThreads) nvfp4_values_rows_kernel(SrcRows s, float gs,
                                                                     uint16_t* __restrict__ out) {
  ptx::grid_dependency_trigger();  // a dependent GEMM 1 waits for this grid's end (decode_pdl)
  if constexpr (!KPERM) {
    int64_t r, b;
    if (!thread_block(s, r, b)) return;
    uint32_t lo[4], hi[4];
    quantize_block_values(s, r, b, gs, lo, hi);
    uint4* o = reinterpret_cast<uint4*>(out + r * s.K + b * kNvfp4Block);
    o[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    o[1] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
  } else {
    const int64_t Kp = kperm_row(s.K), nb = Kp / kNvfp4Block;
    const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    if (i >= s.rows * nb) return;
    const int64_t r = i / nb, b = i % nb;
    if (!row_live(s, r)) return;
    uint32_t v[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    if (b * kNvfp4Block < s.K) {
      uint32_t lo[4], hi[4];
      quantize_block_values(s, r, b, gs, lo, hi);
      for (int j = 0; j < 4; ++j) v[j] = lo[j], v[4 + j] = hi[j];
    }
    uint16_t* o = out + r * Kp + kperm_block_at(b);  // pair j at o + 8j (gemm_internal.hpp)
#pragma unroll
    for (int j = 0; j < 8; ++j) *reinterpret_cast<uint32_t*>(o + 8 * j) = v[j];
  }
}

// out (rows, K) bf16: one thread per 8 columns. KPERM: k-permuted, rows of kperm_row(K) with
// zeros past K (as nvfp4_values_rows_kernel's).
template <bool KPERM>
__global__ void __launch_bounds__(kThreads) bf16_rows_kernel(SrcRows s, uint16_t* __restrict__ out) {
  const int64_t row_len = KPERM ? kperm_row(s.K) : s.K, nc = row_len / 8;
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  ptx::grid_dependency_trigger();  // a dependent GEMM 1 waits for this grid's end (decode_pdl)
  if (i >= s.rows * nc) return;
  const int64_t r = i / nc, c = (i % nc) * 8;
  if (!row_live(s, r)) return;
  float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if (c < s.K) load_row<8>(s, r, c, v);
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) w[j] = uint32_t(bf16_from_f32(v[2 * j])) | (uint32_t(bf16_from_f32(v[2 * j + 1])) << 16);
  if constexpr (KPERM) {
    uint16_t* o = out + r * row_len + kperm_index(c);  // pair j at o + 8j (c % 8 == 0: kperm_runs_hold)
#pragma unroll
    for (int j = 0; j < 4; ++j) *reinterpret_cast<uint32_t*>(o + 8 * j) = w[j];
    return;
  }
  uint16_t* o = out + r * s.K + c;
  if ((reinterpret_cast<uintptr_t>(o) & 15u) == 0) {
    *reinterpret_cast<uint4*>(o) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = uint16_t(w[j / 2] >> (16 * (j & 1)));
  }
}

SrcRows make_src(const ActRows& a, bool to_bf16) {
  SrcRows s{};
  s.x = a.x;
  s.dtype = value_dtype_code(a.dtype, "activations");
  s.rows = a.rows;
  s.K = a.K;
  s.row_stride = a.row_stride;
  s.row_weight = a.row_weight;
  s.weight_stride = a.weight_stride;
  s.group_count = a.group_count;
  s.M = a.M;
  s.to_bf16 = to_bf16;
  return s;
}

unsigned grid_for(int64_t threads) { return unsigned((threads + kThreads - 1) / kThreads); }

void launch_nvfp4(const SrcRows& s, float gs, uint8_t* data, uint8_t* scale, cudaStream_t stream) {
  if (s.K % kNvfp4Block != 0)
    detail::fail_arg("activations: K: got " + std::to_string(s.K) + ", need a multiple of 16");
  const int64_t n = s.rows * (s.K / kNvfp4Block);
  if (n <= 0) return;
  nvfp4_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, gs, data, scale);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void act_to_nvfp4(const ActRows& src, float gs, uint8_t* data, uint8_t* scale, cudaStream_t stream) {
  launch_nvfp4(make_src(src, true), gs, data, scale, stream);
}

void act_to_nvfp4_values(const ActRows& src, float gs, uint16_t* out, cudaStream_t stream, KOrder order) {
  const SrcRows s = make_src(src, true);
  if (s.K % kNvfp4Block != 0)
    detail::fail_arg("activations: K: got " + std::to_string(s.K) + ", need a multiple of 16");
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) detail::fail_arg("act_to_nvfp4_values: out: need 16-byte alignment");
  const bool kperm = order == KOrder::kperm;
  const int64_t n = s.rows * ((kperm ? kperm_row(s.K) : s.K) / kNvfp4Block);
  if (n <= 0) return;
  if (kperm) nvfp4_values_rows_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(s, gs, out);
  else nvfp4_values_rows_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(s, gs, out);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void act_to_bf16(const ActRows& src, uint16_t* out, cudaStream_t stream, KOrder order) {
  const SrcRows s = make_src(src, true);
  if (s.K % 8 != 0) detail::fail_arg("activations: K: got " + std::to_string(s.K) + ", need a multiple of 8");
  const bool kperm = order == KOrder::kperm;
  if (kperm && s.K % kNvfp4Block != 0)
    detail::fail_arg("activations: K: got " + std::to_string(s.K) + ", need a multiple of 16 (k-permuted rows)");
  const int64_t n = s.rows * ((kperm ? kperm_row(s.K) : s.K) / 8);
  if (n <= 0) return;
  if (kperm) bf16_rows_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(s, out);
  else bf16_rows_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(s, out);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void quantize_nvfp4_rows(const void* x, DType dt, int64_t rows, int64_t K, float gs, uint8_t* data,
                         uint8_t* scale, cudaStream_t stream) {
  ActRows a;
  a.x = x;
  a.dtype = dt;
  a.rows = rows;
  a.K = K;
  a.row_stride = K;
  launch_nvfp4(make_src(a, false), gs, data, scale, stream);
}

}  // namespace fp4moe::cuda
