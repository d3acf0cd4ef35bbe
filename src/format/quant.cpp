// Host-array NVFP4 / MXFP4 quantization and the swizzled scale layout (see quant.hpp).
#include "format/quant.hpp"

#include <cmath>
#include <cstring>

namespace fp4moe::detail {

void nvfp4_quantize_rows(const float* x, int64_t rows, int64_t K, float gs, uint8_t* data,
                         uint8_t* scale) {
  const int64_t nb = K / kNvfp4Block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + r * K + b * kNvfp4Block;
      float amax = 0.0f;
      for (int i = 0; i < kNvfp4Block; ++i) amax = amax_update(amax, xb[i]);
      const uint8_t s = nvfp4_scale_code(amax, gs);
      const float inv = nvfp4_inv_scale(s, gs);
      scale[r * nb + b] = s;
      uint8_t* db = data + r * (K / 2) + b * (kNvfp4Block / 2);
      for (int j = 0; j < kNvfp4Block / 2; ++j)
        db[j] = pack_e2m1(e2m1_from_f32(xb[2 * j] * inv), e2m1_from_f32(xb[2 * j + 1] * inv));
    }
  }
}

void nvfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K,
                           float dq, float* out) {
  const int64_t nb = K / kNvfp4Block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float s = e4m3_to_f32(scale[r * nb + b]);
      const uint8_t* db = data + r * (K / 2) + b * (kNvfp4Block / 2);
      float* ob = out + r * K + b * kNvfp4Block;
      for (int i = 0; i < kNvfp4Block; ++i)
        ob[i] = (e2m1_to_f32(unpack_e2m1(db[i / 2], i & 1)) * s) * dq;
    }
  }
}

void nvfp4_fake_quant(const float* x, int64_t K, float gs, float dq, float* out) {
  // One block at a time so that out may alias x and no buffer is allocated.
  for (int64_t b = 0; b < K / kNvfp4Block; ++b) {
    const float* xb = x + b * kNvfp4Block;
    float amax = 0.0f;
    for (int i = 0; i < kNvfp4Block; ++i) amax = amax_update(amax, xb[i]);
    const uint8_t s = nvfp4_scale_code(amax, gs);
    const float inv = nvfp4_inv_scale(s, gs);
    const float sv = e4m3_to_f32(s);
    float* ob = out + b * kNvfp4Block;
    for (int i = 0; i < kNvfp4Block; ++i) ob[i] = (e2m1_to_f32(e2m1_from_f32(xb[i] * inv)) * sv) * dq;
  }
}

float nvfp4_weight_dq_scale(float amax) {
  if (amax == 0.0f) return 1.0f;
  return amax / (kE2m1Max * kE4m3Max);
}

void mxfp4_quantize_rows(const float* x, int64_t rows, int64_t K, uint8_t* data, uint8_t* scale) {
  const int64_t nb = K / kMxfp4Block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + r * K + b * kMxfp4Block;
      float amax = 0.0f;
      for (int i = 0; i < kMxfp4Block; ++i) amax = amax_update(amax, xb[i]);
      const uint8_t s = mxfp4_scale_code(amax);
      scale[r * nb + b] = s;
      uint8_t* db = data + r * (K / 2) + b * (kMxfp4Block / 2);
      for (int j = 0; j < kMxfp4Block / 2; ++j)
        db[j] = pack_e2m1(e2m1_from_f32(mxfp4_apply_inv_scale(xb[2 * j], s)),
                          e2m1_from_f32(mxfp4_apply_inv_scale(xb[2 * j + 1], s)));
    }
  }
}

void mxfp4_dequantize_rows(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t K,
                           float* out) {
  const int64_t nb = K / kMxfp4Block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float s = e8m0_to_f32(scale[r * nb + b]);
      const uint8_t* db = data + r * (K / 2) + b * (kMxfp4Block / 2);
      float* ob = out + r * K + b * kMxfp4Block;
      for (int i = 0; i < kMxfp4Block; ++i) ob[i] = e2m1_to_f32(unpack_e2m1(db[i / 2], i & 1)) * s;
    }
  }
}

void swizzle_scale_matrix(const uint8_t* in, int64_t R, int64_t C, uint8_t* out) {
  const int64_t Rp = swizzle_pad_rows(R), Cp = swizzle_pad_cols(C);
  std::memset(out, 0, size_t(Rp * Cp));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) out[swizzled_scale_offset(r, c, Cp)] = in[r * C + c];
}

void unswizzle_scale_matrix(const uint8_t* in, int64_t R, int64_t C, uint8_t* out) {
  const int64_t Cp = swizzle_pad_cols(C);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) out[r * C + c] = in[swizzled_scale_offset(r, c, Cp)];
}

}  // namespace fp4moe::detail
