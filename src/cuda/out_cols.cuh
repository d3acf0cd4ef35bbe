// Four consecutive columns of an output row (out dtype code: pipeline.hpp value_dtype_code):
// read as fp32, or written from fp32 with one rounding to the narrow dtype. The combine's and the
// batched writeback's stores (combine.cu), and the one-kernel layer's (decode_layer.cu).
#pragma once

#include <cstdint>

#include "fp4moe/format.h"

namespace fp4moe::cuda {

inline constexpr int kOutCols = 4;

__device__ __forceinline__ void read_out(const void* o, int dt, float (&v)[kOutCols]) {
  if (dt == 0) {
    const float* p = static_cast<const float*>(o);
#pragma unroll
    for (int i = 0; i < kOutCols; ++i) v[i] = p[i];
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(o);
#pragma unroll
    for (int i = 0; i < kOutCols; ++i) v[i] = dt == 1 ? bf16_to_f32(p[i]) : f16_to_f32(p[i]);
  }
}

__device__ __forceinline__ void write_out(void* o, int dt, const float (&v)[kOutCols]) {
  if (dt == 0) {
    float* p = static_cast<float*>(o);
#pragma unroll
    for (int i = 0; i < kOutCols; ++i) p[i] = v[i];
  } else {
    uint16_t* p = static_cast<uint16_t*>(o);
#pragma unroll
    for (int i = 0; i < kOutCols; ++i) p[i] = dt == 1 ? bf16_from_f32(v[i]) : f16_from_f32(v[i]);
  }
}

}  // namespace fp4moe::cuda
