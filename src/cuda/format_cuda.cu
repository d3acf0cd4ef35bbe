// The format functions on device arrays (format_cuda.hpp): NVFP4/MXFP4 dequantization,
// MXFP4 quantization and the swizzled 128x4 scale layout. NVFP4 quantization is the
// activation quantizer's plain entry (quantize.cu, cuda::quantize_nvfp4_rows).
//
// Each kernel is the host loop of format/quant.cpp with its loop over work items
// spread over threads; the per-element lines are the same format.h calls. All arrays
// are contiguous, so a (rows, K) problem is one flat run of rows * K elements: groups of
// 8 elements (4 data bytes) never straddle a block (8 divides 16 and 32) or a row
// (K % 16 == 0). Grid-stride loops, so any size fits one launch.
#include "cuda/format_cuda.hpp"

#include <algorithm>
#include <cstdint>

#include "cuda/common/check.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // beyond 2^28 work items, threads loop

unsigned grid_for(int64_t items) {
  return unsigned(std::min<int64_t>((items + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ __forceinline__ int64_t first_item() { return int64_t(blockIdx.x) * kThreads + threadIdx.x; }
__device__ __forceinline__ int64_t item_stride() { return int64_t(gridDim.x) * kThreads; }

__device__ __forceinline__ bool aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// Elements [i, i + N) of an f32|bf16|f16 array as fp32 (exact).
template <int N>
__device__ __forceinline__ void load_f32(const void* x, DType dt, int64_t i, float (&v)[N]) {
  if (dt == DType::f32) {
    const float* p = static_cast<const float*>(x) + i;
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = p[j];
  } else if (dt == DType::bf16) {
    const uint16_t* p = static_cast<const uint16_t*>(x) + i;
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = bf16_to_f32(p[j]);
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(x) + i;
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = f16_to_f32(p[j]);
  }
}

// v as elements [i, i + 8) of an f32|bf16|f16 array, rounded to nearest even
// (detail::write_activation).
__device__ __forceinline__ void store8(void* out, DType dt, int64_t i, const float (&v)[8]) {
  if (dt == DType::f32) {
    float* o = static_cast<float*>(out) + i;
    if (aligned(o, 16)) {
      reinterpret_cast<float4*>(o)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(o)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = v[j];
    }
    return;
  }
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint16_t lo = dt == DType::bf16 ? bf16_from_f32(v[2 * j]) : f16_from_f32(v[2 * j]);
    const uint16_t hi = dt == DType::bf16 ? bf16_from_f32(v[2 * j + 1]) : f16_from_f32(v[2 * j + 1]);
    w[j] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
  uint16_t* o = static_cast<uint16_t*>(out) + i;
  if (aligned(o, 16)) {
    *reinterpret_cast<uint4*>(o) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = uint16_t(w[j / 2] >> (16 * (j & 1)));
  }
}

// 4 bytes from p, byte j in bits 8j..8j+7.
__device__ __forceinline__ uint32_t load4(const uint8_t* p) {
  if (aligned(p, 4)) return *reinterpret_cast<const uint32_t*>(p);
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// data (groups * 4) u8, scale (groups * 8 / kBlock): one thread per group of 8 elements
// (4 data bytes, one scale). kBlock 16: NVFP4, (e2m1 * e4m3) * dq; 32: MXFP4, e2m1 * e8m0.
template <int kBlock>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(const uint8_t* __restrict__ data,
                                                              const uint8_t* __restrict__ scale, int64_t groups,
                                                              float dq, void* __restrict__ out, DType out_dtype) {
  static_assert(kBlock % 8 == 0, "a group of 8 elements lies inside one scale block");
  for (int64_t g = first_item(); g < groups; g += item_stride()) {
    const uint8_t code = scale[g * 8 / kBlock];
    const uint32_t bytes = load4(data + 4 * g);
    float v[8];
    if constexpr (kBlock == kNvfp4Block) {
      const float s = e4m3_to_f32(code);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = (e2m1_to_f32(unpack_e2m1(uint8_t(bytes >> (8 * (j / 2))), j & 1)) * s) * dq;
    } else {
      const float s = e8m0_to_f32(code);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = e2m1_to_f32(unpack_e2m1(uint8_t(bytes >> (8 * (j / 2))), j & 1)) * s;
    }
    store8(out, out_dtype, 8 * g, v);
  }
}

// x (blocks * 32), data (blocks * 16), scale (blocks): one thread per MXFP4 block. The
// amax is a thread-local amax_update chain, the host loop's: order-independent, and NaN
// elements, quiet or signalling, do not raise it.
__global__ void __launch_bounds__(kThreads) mxfp4_quantize_kernel(const void* __restrict__ x, DType x_dtype,
                                                                  int64_t blocks, uint8_t* __restrict__ data,
                                                                  uint8_t* __restrict__ scale) {
  for (int64_t b = first_item(); b < blocks; b += item_stride()) {
    float v[kMxfp4Block];
    load_f32<kMxfp4Block>(x, x_dtype, b * kMxfp4Block, v);
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < kMxfp4Block; ++j) amax = amax_update(amax, v[j]);
    const uint8_t sc = mxfp4_scale_code(amax);
    uint32_t w[4] = {0, 0, 0, 0};  // the block's 16 data bytes
#pragma unroll
    for (int j = 0; j < kMxfp4Block / 2; ++j)
      w[j / 4] |= uint32_t(pack_e2m1(e2m1_from_f32(mxfp4_apply_inv_scale(v[2 * j], sc)),
                                     e2m1_from_f32(mxfp4_apply_inv_scale(v[2 * j + 1], sc))))
                  << (8 * (j % 4));
    uint8_t* d = data + b * (kMxfp4Block / 2);
    if (aligned(d, 16)) {
      *reinterpret_cast<uint4*>(d) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
      for (int j = 0; j < kMxfp4Block / 2; ++j) d[j] = uint8_t(w[j / 4] >> (8 * (j % 4)));
    }
    scale[b] = sc;
  }
}

// One thread per byte (m, r, c) of the padded matrices, r < Rp, c < Cp: each output byte
// is written once (the offset is a bijection of the padded matrix), padding with 0.
__global__ void __launch_bounds__(kThreads) swizzle_kernel(const uint8_t* __restrict__ in, int64_t mats, int64_t R,
                                                           int64_t C, uint8_t* __restrict__ out) {
  const int64_t Rp = swizzle_pad_rows(R), Cp = swizzle_pad_cols(C), per = Rp * Cp;
  for (int64_t t = first_item(); t < mats * per; t += item_stride()) {
    const int64_t m = t / per, r = (t % per) / Cp, c = t % Cp;
    out[m * per + swizzled_scale_offset(r, c, Cp)] = r < R && c < C ? in[(m * R + r) * C + c] : uint8_t(0);
  }
}

// One thread per linear scale (m, r, c), r < R, c < C.
__global__ void __launch_bounds__(kThreads) unswizzle_kernel(const uint8_t* __restrict__ in, int64_t mats,
                                                             int64_t R, int64_t C, uint8_t* __restrict__ out) {
  const int64_t Cp = swizzle_pad_cols(C), per = swizzle_pad_rows(R) * Cp;
  for (int64_t t = first_item(); t < mats * R * C; t += item_stride()) {
    const int64_t m = t / (R * C), r = (t % (R * C)) / C, c = t % C;
    out[t] = in[m * per + swizzled_scale_offset(r, c, Cp)];
  }
}

template <int kBlock>
void launch_dequantize(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K, float dq, void* out,
                       DType out_dtype, cudaStream_t stream) {
  const int64_t groups = rows * K / 8;
  if (groups <= 0) return;
  dequantize_kernel<kBlock><<<grid_for(groups), kThreads, 0, stream>>>(data, scale, groups, dq, out, out_dtype);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void nvfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K, float dq,
                           void* out, DType out_dtype, cudaStream_t stream) {
  launch_dequantize<kNvfp4Block>(data, scale, rows, K, dq, out, out_dtype, stream);
}

void mxfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K, void* out,
                           DType out_dtype, cudaStream_t stream) {
  launch_dequantize<kMxfp4Block>(data, scale, rows, K, 1.0f, out, out_dtype, stream);
}

void mxfp4_quantize_rows(const void* x, DType x_dtype, int64_t rows, int64_t K, uint8_t* data, uint8_t* scale,
                         cudaStream_t stream) {
  const int64_t blocks = rows * (K / kMxfp4Block);
  if (blocks <= 0) return;
  mxfp4_quantize_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(x, x_dtype, blocks, data, scale);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void swizzle_scale_matrices(const uint8_t* in, int64_t mats, int64_t R, int64_t C, uint8_t* out,
                            cudaStream_t stream) {
  const int64_t bytes = mats * swizzle_pad_rows(R) * swizzle_pad_cols(C);
  if (bytes <= 0) return;
  swizzle_kernel<<<grid_for(bytes), kThreads, 0, stream>>>(in, mats, R, C, out);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void unswizzle_scale_matrices(const uint8_t* in, int64_t mats, int64_t R, int64_t C, uint8_t* out,
                              cudaStream_t stream) {
  if (mats * R * C <= 0) return;
  unswizzle_kernel<<<grid_for(mats * R * C), kThreads, 0, stream>>>(in, mats, R, C, out);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace fp4moe::cuda
