// fp4moe/format.h — the one home of the number formats and scale layouts (SPEC §1–2).
//
// Everything here is a pure function of its arguments, usable from host and device
// code (FP4MOE_HD), so the CPU reference, the CPU backend and every CUDA kernel
// quantize, decode and index scales with the same lines.
//
// Floating-point note: these functions are written so that host and device produce
// bit-identical results. They use only IEEE fp32 operations that both sides round the
// same way (+, -, *, / and explicit fmaf); the translation units that include this
// header must not enable fast-math. nvcc contracts a*b+c into fma by default, so every
// expression where that would change a result is written with explicit fmaf or split.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FP4MOE_HD __host__ __device__ __forceinline__
#else
#define FP4MOE_HD inline
#endif

namespace fp4moe {

// ---------------------------------------------------------------------------
// Block geometry
// ---------------------------------------------------------------------------
inline constexpr int kNvfp4Block = 16;  // elements per e4m3 scale along K
inline constexpr int kMxfp4Block = 32;  // elements per e8m0 scale along K
inline constexpr float kE2m1Max = 6.0f;
inline constexpr float kE4m3Max = 448.0f;

// ---------------------------------------------------------------------------
// Bit casts
// ---------------------------------------------------------------------------
FP4MOE_HD uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
FP4MOE_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}
// 2^e for e in [-149, 127] as an exact fp32 (subnormals included).
FP4MOE_HD float exp2i(int e) {
  if (e >= -126) return bits_f32(uint32_t(e + 127) << 23);
  return bits_f32(1u << (e + 149));
}

// ---------------------------------------------------------------------------
// e2m1 (FP4): sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0.
// Magnitudes by code 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
// ---------------------------------------------------------------------------
FP4MOE_HD float e2m1_to_f32(uint8_t code) {
  // code 1 is the subnormal 0.5; codes 2..7 are (1 + m/2) * 2^(e-1), whose fp32 bits are the
  // code's exponent and mantissa bits placed at bits 24-22 over an exponent of 126. No branch.
  const uint32_t mag = code & 7u;
  const uint32_t v = mag >= 2 ? (mag << 22) + (126u << 23) : mag == 1 ? 0x3F000000u : 0u;
  return bits_f32(v | uint32_t(code & 8u) << 28);
}

// Round to nearest, ties to even code, saturate at 6. The thresholds are the
// midpoints of the value table; "<=" where the lower neighbour has the even code.
// NaN saturates to +6 (code 7) whatever its sign bit: callers pass products such as
// x * inv, and the sign of a NaN product is not portable (x86 keeps the NaN operand's,
// CUDA returns the canonical +NaN), while host and device must encode the same bytes.
// Weights are checked for NaN before they reach this.
//
// Arithmetic, no branch (the kernels' requantization runs it per element; the comparison
// chain it replaces compiled to three divergent branches per element): |x|, clamped to 8 as
// bits (NaN too), rounds to a multiple k of the e2m1 quantum q at |x| (0.5 below 2, 1 below
// 4, 2 below 8, 4 at 8) by one fp32 addition of 1.5 * 2^23 * q, whose sum is
// that constant plus k * q with k rounded to nearest even: k's parity is the code's, so the
// ties land on the even code. Then code = k + 2 log2(2q), at most 7.
FP4MOE_HD uint8_t e2m1_from_f32(float x) {
  const uint32_t u = f32_bits(x), mag = u & 0x7FFFFFFFu;
  const uint32_t a = mag < 0x41000000u ? mag : 0x41000000u;  // |x| as bits, at most 8.0 (NaN, inf: 8)
  const int32_t qe = int32_t(a >> 23) - 1;                     // the quantum's exponent field...
  const uint32_t q = uint32_t(qe > 126 ? qe : 126);           // ...at least 0.5's
  const uint32_t magic = (q + 23u) << 23 | 0x400000u;         // 1.5 * 2^23 * 2^(q - 127)
  const uint32_t k = f32_bits(bits_f32(a) + bits_f32(magic)) - magic;
  const uint32_t c = k + 2u * (q - 126u);
  const uint32_t neg = mag <= 0x7F800000u ? u >> 31 : 0u;  // NaN: sign ignored (see above)
  return uint8_t((c < 7u ? c : 7u) | neg << 3);
}

// The value of e2m1_from_f32(x)'s code, e2m1_to_f32(e2m1_from_f32(x)) bit for bit, without the
// code: for the kernels that requantize to NVFP4 values (bf16 e2m1 * e4m3) and need no codes.
// The same rounding, kept in fp32: |x| clamped to 6 as bits (6 is the saturated value; NaN and
// inf clamp there too), the fp32 addition of 1.5 * 2^23 * q rounds it to a multiple of the
// quantum q at |x| with ties to even, and subtracting the constant again is exact. The
// constant's bits are |x|'s exponent bits, at least 1.0's (the quantum 0.5 below 2), plus 22 in
// the exponent field and the 1.5. The sign is x's, but a NaN's (see e2m1_from_f32): bit 31 of
// 0x7F800000 - |x| (as bits) is set exactly when x is NaN. Half the instructions of code, then
// value (v61).
FP4MOE_HD float e2m1_round_f32(float x) {
  const uint32_t u = f32_bits(x), mag = u & 0x7FFFFFFFu;
  const uint32_t a = mag < 0x40C00000u ? mag : 0x40C00000u;  // |x| as bits, at most 6.0
  const uint32_t e = a & 0x7F800000u;
  const float magic = bits_f32((e > 0x3F800000u ? e : 0x3F800000u) + 0x0B400000u);  // 1.5 * 2^23 * q
  const float r = (bits_f32(a) + magic) - magic;
  const uint32_t nan = 0x7F800000u - mag;
  return bits_f32(f32_bits(r) | (u & ~nan & 0x80000000u));
}

// ---------------------------------------------------------------------------
// e4m3fn (FP8 block scale): bias 7, max finite 448, no inf, NaN = 0x7F / 0xFF,
// subnormals m * 2^-9.
// ---------------------------------------------------------------------------
FP4MOE_HD float e4m3_to_f32(uint8_t code) {
  // A normal code's exponent and mantissa bits placed at bits 30-20 over an exponent of 120
  // are its fp32 bits; a subnormal's value m * 2^-9 is exact in fp32. No branch.
  const uint32_t c = code & 0x7Fu;
  const uint32_t v = c == 0x7Fu ? 0x7FC00000u : c >= 8u ? (c << 20) + (120u << 23) : f32_bits(float(c) * exp2i(-9));
  return bits_f32(v | uint32_t(code & 0x80u) << 24);
}

// fp32 -> e4m3fn, round to nearest even, saturating to +-448; NaN -> 0x7F (sign kept).
// Arithmetic, no branch and no division: |x|, clamped to 512 as bits (inf too), rounds to a
// multiple k of the e4m3 quantum q = 2^(max(e, -6) - 3) at |x| (e its exponent) by one fp32
// addition of 1.5 * 2^23 * q (k rounded to nearest even, and k's parity is the code's). In
// binade E (fp32 exponent field, at least 121 = 2^-6's) the code is 8 (E - 120) + k - 8: a
// subnormal's k is its mantissa, a normal's k is 8 + its mantissa, and k = 16 (rounded up into
// the next binade) gives that binade's first code. Then at most 0x7E (448).
FP4MOE_HD uint8_t e4m3_from_f32(float x) {
  const uint32_t u = f32_bits(x), mag = u & 0x7FFFFFFFu;
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = mag < 0x44000000u ? mag : 0x44000000u;  // |x| as bits, at most 512 (inf: 512)
  const uint32_t e = a >> 23 > 121u ? a >> 23 : 121u;
  const uint32_t magic = (e + 20u) << 23 | 0x400000u;  // 1.5 * 2^23 * 2^(e - 130)
  const uint32_t k = f32_bits(bits_f32(a) + bits_f32(magic)) - magic;
  const uint32_t c = (e << 3) + k - 968u;
  return uint8_t(sign | (mag > 0x7F800000u ? 0x7Fu : c < 0x7Eu ? c : 0x7Eu));
}

// ---------------------------------------------------------------------------
// e8m0 (MX block scale): 2^(code - 127); 0xFF is NaN.
// ---------------------------------------------------------------------------
FP4MOE_HD float e8m0_to_f32(uint8_t code) {
  if (code == 0xFF) return bits_f32(0x7FC00000u);
  return exp2i(int(code) - 127);  // code 0 is 2^-127, a subnormal fp32: exact
}

// ---------------------------------------------------------------------------
// bf16 / fp16 (activations). RNE from fp32; NaN kept quiet.
// ---------------------------------------------------------------------------
FP4MOE_HD uint16_t bf16_from_f32(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
FP4MOE_HD float bf16_to_f32(uint16_t h) { return bits_f32(uint32_t(h) << 16); }
FP4MOE_HD float round_bf16(float x) { return bf16_to_f32(bf16_from_f32(x)); }

FP4MOE_HD float f16_to_f32(uint16_t h) {
  const uint32_t s = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  float v;
  if (e == 31) return bits_f32(s | 0x7F800000u | (m << 13));
  if (e == 0) v = float(m) * exp2i(-24);
  else v = bits_f32(((e + 112u) << 23) | (m << 13));
  return s ? -v : v;
}
FP4MOE_HD uint16_t f16_from_f32(float x) {
  const uint32_t u = f32_bits(x);
  const uint16_t s = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(s | 0x7E00u);
  const float f = bits_f32(a);
  if (f >= 65520.0f) return uint16_t(s | 0x7C00u);  // rounds to inf
  int e = int(a >> 23) - 127;
  if (e < -14) e = -14;
  const float q = exp2i(e - 10);
  const float v = rintf(f / q) * q;
  if (v == 0.0f) return s;
  const uint32_t vb = f32_bits(v);
  const int ve = int(vb >> 23) - 127;
  if (ve < -14) return uint16_t(s | uint16_t(v / exp2i(-24)));
  return uint16_t(s | uint16_t((ve + 15) << 10) | uint16_t((vb >> 13) & 1023u));
}

// ---------------------------------------------------------------------------
// Block amax (SPEC §2 amax = max |x_i|), one element at a time from amax = 0:
// amax = amax_update(amax, x_i). A NaN element, quiet or signalling, leaves amax as it
// was, so the result is the largest |x_i| over the non-NaN elements, in any order.
// A comparison and not fmaxf: glibc's fmaxf returns NaN when an operand is a signalling
// NaN (IEEE 754-2008 maxNum), after which the chain forgets every element before it,
// while CUDA's fmaxf skips every NaN; a NaN compares false on both.
// ---------------------------------------------------------------------------
FP4MOE_HD float amax_update(float amax, float x) {
  const float a = fabsf(x);
  return a > amax ? a : amax;
}

// ---------------------------------------------------------------------------
// NVFP4 block quantization (SPEC §2), for one 16-element block with quantization
// scale gs = q_scale = 1 / dq_scale:
//   s   = e4m3_rn_sat(gs * (amax * (1/6)))
//   inv = (s == 0) ? 0 : 1 / (float(s) * (1/gs))
//   q_i = e2m1_rn_sat(x_i * inv)
// ---------------------------------------------------------------------------
FP4MOE_HD uint8_t nvfp4_scale_code(float amax, float gs) {
  const float t = amax * (1.0f / 6.0f);
  return e4m3_from_f32(gs * t);
}
FP4MOE_HD float nvfp4_inv_scale(uint8_t scale_code, float gs) {
  const float s = e4m3_to_f32(scale_code);
  if (s == 0.0f) return 0.0f;
  const float inv_gs = 1.0f / gs;
  const float d = s * inv_gs;
  return 1.0f / d;
}

// ---------------------------------------------------------------------------
// MXFP4 block quantization (OCP MX v1.0): e = floor(log2(amax)) - 2, clamped to the
// e8m0 range; amax 0 -> code 0. Returns the e8m0 code (e + 127).
// ---------------------------------------------------------------------------
FP4MOE_HD uint8_t mxfp4_scale_code(float amax) {
  if (!(amax > 0.0f)) return 0;  // 0 (and NaN) -> code 0
  if (amax > 3.4028235e38f) return 254;
  int e2;  // amax = f * 2^e2 with f in [0.5, 1): floor(log2 amax) = e2 - 1
  (void)frexpf(amax, &e2);
  int e = e2 - 1 - 2;
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return uint8_t(e + 127);
}
// x / 2^e as an exact multiplication by 2^-e (no rounding except at fp32 underflow).
FP4MOE_HD float mxfp4_apply_inv_scale(float x, uint8_t scale_code) {
  const int e = int(scale_code) - 127;
  // split 2^-e into two factors so neither over- nor underflows for e in [-127, 127]
  const int h = -e / 2;
  return (x * exp2i(h)) * exp2i(-e - h);
}

// ---------------------------------------------------------------------------
// Packing: element 2j in the low nibble of byte j, element 2j+1 in the high nibble.
// ---------------------------------------------------------------------------
FP4MOE_HD uint8_t pack_e2m1(uint8_t lo, uint8_t hi) { return uint8_t((lo & 15u) | (hi << 4)); }
FP4MOE_HD uint8_t unpack_e2m1(uint8_t byte, int which) { return which ? uint8_t(byte >> 4) : uint8_t(byte & 15u); }

// ---------------------------------------------------------------------------
// Swizzled 128x4 scale layout (what block-scaled tensor cores read).
// One matrix of R rows and C scale columns is padded to Rp = ceil(R/128)*128,
// Cp = ceil(C/4)*4 (padding bytes are 0). Byte offset of scale (r, c):
//   ((r/128) * (Cp/4) + c/4) * 512 + (r%32) * 16 + ((r/32)%4) * 4 + (c%4)
// Experts of a 3-D tensor follow one another, Rp*Cp bytes each.
// ---------------------------------------------------------------------------
FP4MOE_HD int64_t swizzle_pad_rows(int64_t rows) { return (rows + 127) / 128 * 128; }
FP4MOE_HD int64_t swizzle_pad_cols(int64_t cols) { return (cols + 3) / 4 * 4; }
FP4MOE_HD int64_t swizzled_scale_offset(int64_t r, int64_t c, int64_t padded_cols) {
  return ((r / 128) * (padded_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + (c % 4);
}

// ---------------------------------------------------------------------------
// Portable fp32 math: bit-identical on host and device (explicit fmaf only), so that
// routing decisions made on the CPU and the GPU agree on every input.
// ---------------------------------------------------------------------------
// portable_expf's steps, also taken by the GPU epilogues' straight-line activation
// (cuda/gemm_internal.hpp gemm1_activation_mid), which must give the same bits:
// n = rintf(x * kPortableLog2e); exp(x) = exp(r) * 2^n with r = portable_exp_reduce(x, n)
// (|r| <= ln2/2, ln2 split in two for an exact reduction) and exp(r) = portable_exp_poly(r)
// (a degree-6 polynomial: Taylor coefficients, Horner with fma).
inline constexpr float kPortableLog2e = 1.4426950408889634f;
FP4MOE_HD float portable_exp_reduce(float x, float n) {
  const float r = fmaf(n, -0.693145751953125f, x);
  return fmaf(n, -1.428606765330187e-06f, r);
}
FP4MOE_HD float portable_exp_poly(float r) {
  float p = 1.3888889e-03f;
  p = fmaf(p, r, 8.3333333e-03f);
  p = fmaf(p, r, 4.1666667e-02f);
  p = fmaf(p, r, 1.6666667e-01f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  return fmaf(p, r, 1.0f);
}
// exp(x) with < 2 ulp error over the fp32 range; overflow -> inf, underflow -> 0.
FP4MOE_HD float portable_expf(float x) {
  if (x != x) return x;
  if (x > 88.72283935546875f) return bits_f32(0x7F800000u);
  if (x < -103.97208404541016f) return 0.0f;
  const float n = rintf(x * kPortableLog2e);
  const float p = portable_exp_poly(portable_exp_reduce(x, n));
  const int ni = int(n);
  // scale by 2^n in two steps so that results near the subnormal range stay exact-ish
  const int h = ni / 2;
  return (p * exp2i(h)) * exp2i(ni - h);
}
FP4MOE_HD float portable_sigmoidf(float x) { return 1.0f / (1.0f + portable_expf(-x)); }

}  // namespace fp4moe
