// The public format functions (fp4moe.hpp, SPEC §2) on device arrays: what
// quantize_nvfp4 & co. run for CUDA tensors (src/format/format.cpp validates, makes the
// tensors' device current and calls these).
//
// Every value-level step is a format.h call, the same lines the host loops of
// format/quant.hpp run, so the bytes and values are bit-identical to the host
// functions. The one exception is NaN outputs of dequantization: NaN on both sides,
// but payload and sign are the hardware's (x86 keeps the NaN operand's, CUDA returns
// the canonical +NaN).
//
// Arrays are contiguous and row-major on the current device, with any alignment of
// their elements (16-byte vector accesses are taken where a pointer allows). K is the
// reduction dim, a multiple of the block (16 NVFP4, 32 MXFP4), checked by the caller.
// Every launcher launches at most one kernel on `stream` (none when there is nothing
// to do), never allocates and never synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend.hpp"

namespace fp4moe::cuda {

// NVFP4 quantization of plain tensors is cuda::quantize_nvfp4_rows (pipeline.hpp).

// data (rows, K/2) u8, scale (rows, K/16) e4m3, linear -> out (rows, K) f32|bf16|f16:
// (e2m1 * e4m3) * dq in fp32, then rounded to out's dtype (detail::nvfp4_dequantize_rows).
void nvfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K, float dq,
                           void* out, DType out_dtype, cudaStream_t stream);

// x (rows, K) f32|bf16|f16 -> data (rows, K/2) u8, scale (rows, K/32) e8m0
// (detail::mxfp4_quantize_rows on the same values).
void mxfp4_quantize_rows(const void* x, DType x_dtype, int64_t rows, int64_t K, uint8_t* data, uint8_t* scale,
                         cudaStream_t stream);

// data (rows, K/2) u8, scale (rows, K/32) e8m0 -> out (rows, K) f32|bf16|f16: e2m1 * 2^e
// (detail::mxfp4_dequantize_rows), rounded to out's dtype.
void mxfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K, void* out,
                           DType out_dtype, cudaStream_t stream);

// `mats` matrices back to back: in (mats, R, C) linear -> out (mats, Rp * Cp) swizzled
// 128x4 (format.h swizzled_scale_offset), every padding byte 0.
void swizzle_scale_matrices(const uint8_t* in, int64_t mats, int64_t R, int64_t C, uint8_t* out,
                            cudaStream_t stream);
// The inverse: in (mats, Rp * Cp) swizzled -> out (mats, R, C) linear; padding not read.
void unswizzle_scale_matrices(const uint8_t* in, int64_t mats, int64_t R, int64_t C, uint8_t* out,
                              cudaStream_t stream);

}  // namespace fp4moe::cuda
