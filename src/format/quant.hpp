// Block-scaled formats on host arrays (SPEC §1-2): the loops that the reference, prepare,
// the CLI and the tests share. Every value-level decision (rounding, scale choice,
// swizzle offset) is a call into fp4moe/format.h, so these functions cannot drift from
// the CUDA kernels that include the same header.
//
// Arrays are row-major and contiguous; K is the reduction dimension. Preconditions
// (K % 16 or K % 32, finite positive global scales) are checked by the public tensor
// functions (format.cpp) and by prepare, not here.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "fp4moe/format.h"
#include "fp4moe/fp4moe.hpp"

namespace fp4moe::detail {

// ---------------------------------------------------------------------------
// NVFP4
// ---------------------------------------------------------------------------
// x (rows, K) f32 -> data (rows, K/2) u8, two e2m1 per byte, low nibble first;
// scale (rows, K/16) e4m3, linear. gs = q_scale = 1 / dq_scale. The SPEC §2 canonical
// formula, amax by amax_update over the block (a NaN element, quiet or signalling, does
// not raise amax).
void nvfp4_quantize_rows(const float* x, int64_t rows, int64_t K, float gs, uint8_t* data,
                         uint8_t* scale);

// data (rows, K/2) u8, scale (rows, K/16) e4m3 -> out (rows, K) f32:
// out = (e2m1 * e4m3) * dq in fp32; the product in parentheses is exact.
void nvfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K,
                           float dq, float* out);

// One row of K through quantize then dequantize: the W4A4 activation round trip.
// out may alias x.
void nvfp4_fake_quant(const float* x, int64_t K, float gs, float dq, float* out);

// Weight dq_scale (ModelOpt weight_scale_2) for a tensor whose largest |value| is amax:
// amax / (6 * 448) in fp32; the caller quantizes with gs = 1 / dq. An all-zero tensor
// gets 1 so that gs stays finite (any dq dequantizes its zeros to zeros).
float nvfp4_weight_dq_scale(float amax);

// ---------------------------------------------------------------------------
// MXFP4
// ---------------------------------------------------------------------------
// x (rows, K) f32 -> data (rows, K/2) u8, scale (rows, K/32) e8m0 (OCP MX v1.0).
void mxfp4_quantize_rows(const float* x, int64_t rows, int64_t K, uint8_t* data, uint8_t* scale);

// data (rows, K/2) u8, scale (rows, K/32) e8m0 -> out (rows, K) f32 = e2m1 * 2^e (exact
// unless it underflows fp32).
void mxfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K,
                           float* out);

// ---------------------------------------------------------------------------
// Swizzled 128x4 scale layout of one matrix (R rows, C scale columns)
// ---------------------------------------------------------------------------
// in (R, C) linear -> out (Rp * Cp) swizzled, every padding byte 0.
void swizzle_scale_matrix(const uint8_t* in, int64_t R, int64_t C, uint8_t* out);
// in (Rp * Cp) swizzled -> out (R, C) linear; padding bytes are not read.
void unswizzle_scale_matrix(const uint8_t* in, int64_t R, int64_t C, uint8_t* out);

// ---------------------------------------------------------------------------
// Activation elements (f32 | bf16 | f16)
// ---------------------------------------------------------------------------
// Element i of an f32|bf16|f16 array as fp32 (exact: every bf16/f16 is an fp32).
inline float read_activation(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    default: fail_arg(std::string("read_activation: dtype: got ") + dtype_name(t) + ", need f32|bf16|f16");
  }
}
// Store v into element i, rounded to nearest even in the array's dtype.
inline void write_activation(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = v; return;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = bf16_from_f32(v); return;
    case DType::f16: static_cast<uint16_t*>(base)[i] = f16_from_f32(v); return;
    default: fail_arg(std::string("write_activation: dtype: got ") + dtype_name(t) + ", need f32|bf16|f16");
  }
}

}  // namespace fp4moe::detail
