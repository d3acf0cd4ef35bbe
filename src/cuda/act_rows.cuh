// The activation rows' value rules on the device (pipeline.hpp ActRows): each value taken as
// bf16, optionally times its router weight, and the NVFP4 quantization of a block of 16. One
// home for quantize.cu's kernels and the one-token layer kernel (decode_layer.cu), so both
// make the same bytes (those of detail::nvfp4_quantize_rows: format.h's steps, the CPU's).
#pragma once

#include <cstdint>

#include "cuda/gemm_internal.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cuda::act {

struct SrcRows {
  const void* x;
  int dtype;             // 0 f32, 1 bf16, 2 f16
  int64_t rows, K, row_stride;
  const float* row_weight;
  int64_t weight_stride;
  const int32_t* group_count;
  int64_t M;
  bool to_bf16;          // round each value to bf16 first (the layer's input rule)
};

// Row r is skipped in the batched format when r % M is at or past its group's count.
__device__ __forceinline__ bool row_live(const SrcRows& s, int64_t r) {
  if (!s.group_count) return true;
  return r % s.M < int64_t(s.group_count[r / s.M]);
}

// N consecutive elements of row r starting at column c, as fp32, after the layer's
// bf16 rounding and router-weight multiply when asked for.
template <int N>
__device__ __forceinline__ void load_row(const SrcRows& s, int64_t r, int64_t c, float (&v)[N]) {
  const int64_t off = r * s.row_stride + c;
  if (s.dtype == 0) {
    const float* p = static_cast<const float*>(s.x) + off;
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = p[i];
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(s.x) + off;
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = s.dtype == 1 ? bf16_to_f32(p[i]) : f16_to_f32(p[i]);
  }
  if (s.to_bf16) {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = round_bf16(v[i]);
  }
  if (s.row_weight) {
    const float w = s.row_weight[r * s.weight_stride];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = round_bf16(v[i] * w);
  }
}

// Block b (16 values) of row r: its values v (load_row) and its scale code with q_scale gs
// (SPEC §2: amax from 0 by amax_update, as the CPU quantizer).
__device__ __forceinline__ uint8_t load_block(const SrcRows& s, int64_t r, int64_t b, float gs,
                                              float (&v)[kNvfp4Block]) {
  load_row<kNvfp4Block>(s, r, b * kNvfp4Block, v);
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kNvfp4Block; ++j) amax = amax_update(amax, v[j]);
  return nvfp4_scale_code(amax, gs);
}

// Block b (16 values) of row r quantized with q_scale gs: returns its scale code; lo, hi are
// its 8 data bytes (two e2m1 per byte, low nibble first; bytes 0-3 in lo, 4-7 in hi).
__device__ __forceinline__ uint8_t quantize_block(const SrcRows& s, int64_t r, int64_t b, float gs, uint32_t& lo,
                                                  uint32_t& hi) {
  float v[kNvfp4Block];
  const uint8_t sc = load_block(s, r, b, gs, v);
  const float inv = nvfp4_inv_scale(sc, gs);
  lo = hi = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    lo |= uint32_t(pack_e2m1(e2m1_from_f32(v[2 * j] * inv), e2m1_from_f32(v[2 * j + 1] * inv))) << (8 * j);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    hi |= uint32_t(pack_e2m1(e2m1_from_f32(v[8 + 2 * j] * inv), e2m1_from_f32(v[9 + 2 * j] * inv))) << (8 * j);
  return sc;
}

// quantize_block's values instead of its codes: lo elements 0-7, hi elements 8-15 of block b
// of row r as bf16 pairs (nvfp4_requant_values_bf16x8: the bits of the codes' values through
// nvfp4_value_bf16).
__device__ __forceinline__ void quantize_block_values(const SrcRows& s, int64_t r, int64_t b, float gs,
                                                      uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  float v[kNvfp4Block];
  const uint8_t sc = load_block(s, r, b, gs, v);
  const float inv = nvfp4_inv_scale(sc, gs), sv = e4m3_to_f32(sc);
  nvfp4_requant_values_bf16x8(v, inv, sv, lo);
  nvfp4_requant_values_bf16x8(v + 8, inv, sv, hi);
}

}  // namespace fp4moe::cuda::act
