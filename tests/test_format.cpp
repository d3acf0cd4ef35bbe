// The number formats and block-scaled tensors of SPEC §1-2 against an independent
// oracle written here: value tables from ldexp, encoders by nearest-value search with
// ties to the even code, and the NVFP4/MXFP4 block formulas spelled out from the SPEC
// text. Nothing here calls format.h to compute an expected value.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "fp4moe/fp4moe.hpp"
#include "pattern_slices.hpp"

namespace {

using namespace fp4moe;

// ---------------------------------------------------------------------------
// Oracle: decoders from the bit-field definitions
// ---------------------------------------------------------------------------
float oracle_e2m1(uint8_t code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const float mag = e == 0 ? 0.5f * float(m) : std::ldexp(1.0f + 0.5f * float(m), e - 1);
  return (code & 8) ? -mag : mag;
}

float oracle_e4m3(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return (code & 0x80) ? -mag : mag;
}

float oracle_e8m0(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(code) - 127);
}

float oracle_f16(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 31) return m ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  if (e == 0) return sign * std::ldexp(float(m), -24);
  return sign * std::ldexp(1.0f + float(m) / 1024.0f, e - 15);
}

// ---------------------------------------------------------------------------
// Oracle: encoders by searching the value table for the nearest value, ties to the
// even code; the sign is taken from the sign bit (so -0 and negatives that round to
// zero get the negative-zero code). Searching over the finite values only is what
// "saturating" means.
// ---------------------------------------------------------------------------
uint8_t nearest_code(double a, int n_codes, float (*decode)(uint8_t)) {
  if (std::isinf(a)) return uint8_t(n_codes - 1);  // every distance is inf: the largest value
  int best = 0;
  double best_d = std::fabs(a - double(decode(0)));
  for (int c = 1; c < n_codes; ++c) {
    const double d = std::fabs(a - double(decode(uint8_t(c))));
    if (d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) best = c, best_d = d;
  }
  return uint8_t(best);
}

uint8_t oracle_e2m1_encode(float x) {
  const uint8_t c = nearest_code(std::fabs(double(x)), 8, oracle_e2m1);
  return std::signbit(x) ? uint8_t(c | 8) : c;
}

// Positive finite e4m3 codes are 0..0x7E, increasing with the value.
uint8_t oracle_e4m3_encode(float x) {
  const uint8_t c = nearest_code(std::fabs(double(x)), 0x7F, oracle_e4m3);
  return std::signbit(x) ? uint8_t(c | 0x80) : c;
}

// ---------------------------------------------------------------------------
// Oracle: block quantizers, written from the SPEC text in plain fp32.
// ---------------------------------------------------------------------------
struct Quantized {
  std::vector<uint8_t> data, scale;
};

Quantized oracle_nvfp4(const std::vector<float>& x, int64_t rows, int64_t K, float gs) {
  Quantized q{std::vector<uint8_t>(size_t(rows * K / 2)), std::vector<uint8_t>(size_t(rows * K / 16))};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < K / 16; ++b) {
      const float* xb = &x[size_t(r * K + b * 16)];
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float t = amax * (1.0f / 6.0f);
      const float scaled = gs * t;
      const uint8_t s = oracle_e4m3_encode(scaled);
      const float sv = oracle_e4m3(s);
      const float inv = sv == 0.0f ? 0.0f : 1.0f / (sv * (1.0f / gs));
      q.scale[size_t(r * (K / 16) + b)] = s;
      for (int i = 0; i < 16; ++i) {
        const uint8_t code = oracle_e2m1_encode(xb[i] * inv);
        uint8_t& byte = q.data[size_t(r * (K / 2) + b * 8 + i / 2)];
        byte = uint8_t(i % 2 == 0 ? (byte & 0xF0) | code : (byte & 0x0F) | (code << 4));
      }
    }
  return q;
}

Quantized oracle_mxfp4(const std::vector<float>& x, int64_t rows, int64_t K) {
  Quantized q{std::vector<uint8_t>(size_t(rows * K / 2)), std::vector<uint8_t>(size_t(rows * K / 32))};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* xb = &x[size_t(r * K + b * 32)];
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      int e = amax == 0.0f ? -127 : std::ilogb(amax) - 2;  // ilogb = floor(log2) for finite > 0
      e = std::clamp(e, -127, 127);
      q.scale[size_t(r * (K / 32) + b)] = uint8_t(e + 127);
      for (int i = 0; i < 32; ++i) {
        const double y = std::ldexp(double(xb[i]), -e);  // exact in double
        const uint8_t code = oracle_e2m1_encode(float(y));
        uint8_t& byte = q.data[size_t(r * (K / 2) + b * 16 + i / 2)];
        byte = uint8_t(i % 2 == 0 ? (byte & 0xF0) | code : (byte & 0x0F) | (code << 4));
      }
    }
  return q;
}

// ---------------------------------------------------------------------------
// Random inputs: fresh each run, the seed printed on failure.
// ---------------------------------------------------------------------------
uint32_t fresh_seed() { return std::random_device{}(); }

// Rows of K values, block by block of `block`, drawn from a mix of the cases that break
// quantizers: wide magnitude ranges, zero blocks, one huge outlier, tiny values whose
// scale is an e4m3 subnormal (or underflows), negative zeros, exact table values.
std::vector<float> random_tensor(std::mt19937& rng, int64_t rows, int64_t K, int block) {
  std::vector<float> x(size_t(rows * K));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-12.0f, 12.0f);
  std::uniform_int_distribution<int> kind(0, 7), pick(0, block - 1), code(0, 15);
  for (int64_t b0 = 0; b0 < rows * K; b0 += block) {
    float* xb = &x[size_t(b0)];
    const float mag = std::pow(10.0f, expo(rng));
    switch (kind(rng)) {
      case 0:  // zero block, some zeros negative
        for (int i = 0; i < block; ++i) xb[i] = (i % 3 == 0) ? -0.0f : 0.0f;
        break;
      case 1:  // one huge value among small ones
        for (int i = 0; i < block; ++i) xb[i] = normal(rng) * 1e-3f;
        xb[pick(rng)] = 1e4f * (normal(rng) > 0 ? 1.0f : -1.0f);
        break;
      case 2:  // tiny: scale near or below the smallest e4m3 subnormal at gs ~ 1
        for (int i = 0; i < block; ++i) xb[i] = normal(rng) * 1e-3f * std::pow(10.0f, -expo(rng) / 4.0f);
        break;
      case 3:  // exact e2m1 values times a power of two (ties everywhere)
        for (int i = 0; i < block; ++i) xb[i] = oracle_e2m1(uint8_t(code(rng))) * std::ldexp(1.0f, int(expo(rng)) / 2);
        break;
      default:
        for (int i = 0; i < block; ++i) xb[i] = normal(rng) * mag;
        if (kind(rng) == 0) xb[pick(rng)] = -0.0f;
    }
  }
  return x;
}

float amax_of(const std::vector<float>& x) {
  float a = 0.0f;
  for (float v : x) a = std::max(a, std::fabs(v));
  return a;
}

// Half the distance to the next e2m1 value above magnitude a (a in [0, 6]).
double e2m1_half_step(double a) { return a < 2.0 ? 0.25 : a < 4.0 ? 0.5 : 1.0; }

// ===========================================================================
// Scalar codecs
// ===========================================================================
TEST(FormatE2m1, DecodesEveryCode) {
  const float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; ++c) {
    const float v = e2m1_to_f32(uint8_t(c));
    EXPECT_EQ(v, oracle_e2m1(uint8_t(c))) << "code " << c;
    EXPECT_EQ(v, (c & 8) ? -table[c & 7] : table[c & 7]) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << "code " << c;  // code 8 is -0
  }
}

TEST(FormatE2m1, EncodesTiesToEven) {
  const struct {
    float x;
    uint8_t code;
  } ties[] = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4}, {3.5f, 6}, {5.0f, 6}};
  for (const auto& t : ties) {
    EXPECT_EQ(e2m1_from_f32(t.x), t.code) << t.x;
    EXPECT_EQ(e2m1_from_f32(-t.x), t.code | 8) << -t.x;
    // just above a tie goes up, just below goes down
    const float up = std::nextafter(t.x, 100.0f), down = std::nextafter(t.x, 0.0f);
    EXPECT_EQ(e2m1_from_f32(up), oracle_e2m1_encode(up)) << up;
    EXPECT_EQ(e2m1_from_f32(down), oracle_e2m1_encode(down)) << down;
    EXPECT_GT(oracle_e2m1(e2m1_from_f32(up)), oracle_e2m1(e2m1_from_f32(down))) << t.x;
  }
}

TEST(FormatE2m1, EncodesEveryValueSaturatesAndKeepsSign) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(e2m1_from_f32(oracle_e2m1(uint8_t(c))), c) << "code " << c;
  for (float x : {5.0001f, 6.0f, 7.0f, 1e30f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(e2m1_from_f32(x), 7) << x;
    EXPECT_EQ(e2m1_from_f32(-x), 15) << -x;
  }
  EXPECT_EQ(e2m1_from_f32(-0.0f), 8);
  EXPECT_EQ(e2m1_from_f32(-0.1f), 8);
  EXPECT_EQ(e2m1_from_f32(1e-40f), 0);
  // NaN is +6 whatever its sign bit, so host and device (canonical +NaN) agree
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(e2m1_from_f32(nan), 7);
  EXPECT_EQ(e2m1_from_f32(-nan), 7);
  EXPECT_EQ(e2m1_from_f32(bits_f32(0xFFC00000u)), 7);  // x86's default NaN (0 * inf) is negative
  // a dense sweep over [-7, 7] against the nearest-value search
  for (int i = -7000; i <= 7000; ++i) {
    const float x = float(i) * 0.001f;
    ASSERT_EQ(e2m1_from_f32(x), oracle_e2m1_encode(x)) << x;
  }
}

// e2m1_round_f32 is the value of e2m1_from_f32's code without the code. Every fp32 bit
// pattern whose low byte is one of 0x00, 0x01, 0x7F, 0x80, 0xFF (every sign, exponent and top
// 15 mantissa bits: the ties, their neighbours, NaN and inf payloads): 84 million inputs, a
// third of a second. (All 2^32 patterns agreed too, once, in v61: 18 s.)
TEST(FormatE2m1, RoundIsTheValueOfTheCode) {
  int64_t bad = 0;
  for (uint32_t hi = 0; hi < (1u << 24); ++hi) {
    for (uint32_t lo : {0x00u, 0x01u, 0x7Fu, 0x80u, 0xFFu}) {
      const float x = bits_f32(hi << 8 | lo);
      const uint32_t got = f32_bits(e2m1_round_f32(x)), want = f32_bits(e2m1_to_f32(e2m1_from_f32(x)));
      if (got != want && ++bad <= 5)
        ADD_FAILURE() << std::hex << "x bits 0x" << (hi << 8 | lo) << ": 0x" << got << " against 0x" << want;
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(f32_bits(e2m1_round_f32(-0.1f)), 0x80000000u);  // -0, as code 8
  EXPECT_EQ(e2m1_round_f32(bits_f32(0xFFC00000u)), 6.0f);   // a negative NaN is +6
  EXPECT_EQ(e2m1_round_f32(-std::numeric_limits<float>::infinity()), -6.0f);
  EXPECT_EQ(e2m1_round_f32(5.0f), 4.0f);   // the tie goes to the even code
  EXPECT_EQ(e2m1_round_f32(-1.75f), -2.0f);
}

TEST(FormatE4m3, DecodesEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(uint8_t(c)), want = oracle_e4m3(uint8_t(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      continue;
    }
    EXPECT_EQ(v, want) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 0x80) << "code " << c;
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
}

TEST(FormatE4m3, RoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(e4m3_from_f32(oracle_e4m3(uint8_t(c))), c) << "code " << c;
  }
}

TEST(FormatE4m3, MidpointsTieToEvenCode) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = oracle_e4m3(uint8_t(c)), hi = oracle_e4m3(uint8_t(c + 1));
    const float mid = (lo + hi) / 2.0f;  // exact: one more mantissa bit than e4m3
    ASSERT_EQ(double(mid), (double(lo) + double(hi)) / 2.0);
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(e4m3_from_f32(mid), even) << "between codes " << c << " and " << c + 1;
    EXPECT_EQ(e4m3_from_f32(-mid), even | 0x80) << "between codes " << c << " and " << c + 1;
    EXPECT_EQ(e4m3_from_f32(std::nextafter(mid, 0.0f)), c) << mid;
    EXPECT_EQ(e4m3_from_f32(std::nextafter(mid, 1e9f)), c + 1) << mid;
  }
}

TEST(FormatE4m3, SaturatesSubnormalsAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.0f, 449.0f, 464.0f, 480.0f, 1e9f, 3.4e38f, inf}) {
    EXPECT_EQ(e4m3_from_f32(x), 0x7E) << x;
    EXPECT_EQ(e4m3_from_f32(-x), 0xFE) << -x;
  }
  // subnormal scales: m * 2^-9 for m in 1..7, their midpoints, and the underflow to 0
  EXPECT_EQ(e4m3_from_f32(std::ldexp(1.0f, -10)), 0x00);                       // tie 0 | 2^-9 -> 0
  EXPECT_EQ(e4m3_from_f32(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(e4m3_from_f32(std::ldexp(1.0f, -11)), 0x00);
  EXPECT_EQ(e4m3_from_f32(1e-30f), 0x00);
  EXPECT_EQ(e4m3_from_f32(1e-45f), 0x00);                                      // fp32 subnormal input
  EXPECT_EQ(e4m3_from_f32(-1e-30f), 0x80);
  EXPECT_EQ(e4m3_from_f32(std::ldexp(3.0f, -10)), 0x02);                       // tie 1|2 -> 2
  EXPECT_EQ(e4m3_from_f32(std::ldexp(5.0f, -10)), 0x02);                       // tie 2|3 -> 2
  EXPECT_EQ(e4m3_from_f32(std::ldexp(15.0f, -10)), 0x08);                      // tie 7*2^-9 | 2^-6 -> 2^-6
  for (int m = 1; m < 8; ++m) EXPECT_EQ(e4m3_from_f32(std::ldexp(float(m), -9)), m);
  // a dense log-spaced sweep against the nearest-value search
  for (int i = 0; i <= 20000; ++i) {
    const float x = std::pow(2.0f, -12.0f + 21.0f * float(i) / 20000.0f);
    ASSERT_EQ(e4m3_from_f32(x), oracle_e4m3_encode(x)) << x;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(e4m3_from_f32(nan) & 0x7F, 0x7F);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(e4m3_from_f32(nan))));
}

// Every fp32 bit pattern through both encoders, against oracles fast enough for 2^32 inputs
// and written another way than format.h's (which rounds by one fp32 addition):
//   e2m1: comparisons with the midpoints of the value table, "<=" where the lower neighbour
//         has the even code;
//   e4m3: x divided by its quantum, rounded by rint, the fields re-derived from the product.
// Both are first checked against the nearest-value search on a dense sweep, so that the
// exhaustive comparison rests on it.
uint8_t oracle_e2m1_by_midpoints(float x) {
  const float a = std::fabs(x);
  uint8_t c = 7;  // > 5, and NaN (every comparison false)
  if (a <= 0.25f) c = 0;
  else if (a < 0.75f) c = 1;
  else if (a <= 1.25f) c = 2;
  else if (a < 1.75f) c = 3;
  else if (a <= 2.5f) c = 4;
  else if (a < 3.5f) c = 5;
  else if (a <= 5.0f) c = 6;
  return uint8_t(c | (!std::isnan(x) && std::signbit(x) ? 8 : 0));
}
uint8_t oracle_e4m3_by_rint(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return uint8_t(sign | 0x7F);
  const float f = std::fabs(x);
  if (f >= 448.0f) return uint8_t(sign | 0x7E);
  const int e = std::max(std::ilogb(f == 0.0f ? 1.0f : f), -6);  // binade, at least the smallest normal's
  const float q = std::ldexp(1.0f, e - 3);
  const float v = std::rint(f / q) * q;  // a power-of-two division: exact
  if (v >= 448.0f) return uint8_t(sign | 0x7E);
  if (v < std::ldexp(1.0f, -6)) return uint8_t(sign | int(v / std::ldexp(1.0f, -9)));
  const int ve = std::ilogb(v);
  return uint8_t(sign | (ve + 7) << 3 | int(std::ldexp(v, -ve) * 8.0f - 8.0f));
}

// Calls check(b) for every fp32 bit pattern b, in as many slices as the machine has threads;
// returns a failing pattern's description (the first of the first slice that has one), or "".
template <class Check>
std::string every_pattern(Check check) {
  std::vector<std::string> first(fp4moe::testing::pattern_slices());
  fp4moe::testing::for_each_pattern_slice([&](unsigned t, uint64_t lo, uint64_t hi) {
    for (uint64_t b = lo; b < hi; ++b) {
      std::string why = check(uint32_t(b));
      if (!why.empty()) {
        first[t] = why;
        return;
      }
    }
  });
  for (const auto& f : first)
    if (!f.empty()) return f;
  return "";
}

std::string hex(uint32_t b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", unsigned(b));
  return buf;
}

// A pattern whose code from `encoder` differs from the oracle's, described, or "".
std::string code_differing_from(uint8_t (*encoder)(float), uint8_t (*oracle)(float)) {
  return every_pattern([&](uint32_t b) -> std::string {
    const float x = bits_f32(b);
    const uint8_t got = encoder(x), want = oracle(x);
    return got == want ? "" : hex(b) + ": code " + std::to_string(got) + ", want " + std::to_string(want);
  });
}

TEST(FormatE2m1, EncodesEveryFp32PatternAsTheMidpointOracle) {
  for (int i = -9000; i <= 9000; ++i) {
    const float x = float(i) * 0.001f;
    ASSERT_EQ(oracle_e2m1_by_midpoints(x), oracle_e2m1_encode(x)) << x;
  }
  EXPECT_EQ(code_differing_from(e2m1_from_f32, oracle_e2m1_by_midpoints), "");
}

TEST(FormatE4m3, EncodesEveryFp32PatternAsTheRintOracle) {
  for (int i = 0; i <= 40000; ++i) {
    const float x = std::pow(2.0f, -14.0f + 24.0f * float(i) / 40000.0f);
    ASSERT_EQ(oracle_e4m3_by_rint(x), oracle_e4m3_encode(x)) << x;
    ASSERT_EQ(oracle_e4m3_by_rint(-x), oracle_e4m3_encode(-x)) << -x;
  }
  for (int c = 0; c < 0x7F; ++c) {  // every value and every midpoint, and their neighbours
    const float v = oracle_e4m3(uint8_t(c)), mid = c < 0x7E ? (v + oracle_e4m3(uint8_t(c + 1))) / 2 : 464.0f;
    for (const float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)})
      ASSERT_EQ(oracle_e4m3_by_rint(x), oracle_e4m3_encode(x)) << x;
  }
  EXPECT_EQ(code_differing_from(e4m3_from_f32, oracle_e4m3_by_rint), "");
}

TEST(FormatE8m0, DecodesEveryCode) {
  for (int c = 0; c < 255; ++c) EXPECT_EQ(e8m0_to_f32(uint8_t(c)), oracle_e8m0(uint8_t(c))) << "code " << c;
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
  EXPECT_GT(e8m0_to_f32(0), 0.0f);
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xFF)));
}

TEST(FormatBf16, RoundTripsAndTiesToEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = bf16_to_f32(uint16_t(h));
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    ASSERT_EQ(bits, h << 16);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(bf16_from_f32(v)))) << h;
      continue;
    }
    ASSERT_EQ(bf16_from_f32(v), h) << h;
    // the midpoint to the next code (same sign, finite) ties to the even code
    if ((h & 0x7FFF) >= 0x7F7F) continue;
    const float next = bf16_to_f32(uint16_t(h + 1));
    const double mid = (double(v) + double(next)) / 2.0;
    const float midf = float(mid);
    ASSERT_EQ(double(midf), mid);
    const uint16_t even = uint16_t((h & 1) ? h + 1 : h);
    ASSERT_EQ(bf16_from_f32(midf), even) << "between " << h << " and " << h + 1;
    ASSERT_EQ(bf16_from_f32(std::nextafter(midf, v)), h);
    ASSERT_EQ(bf16_from_f32(std::nextafter(midf, next)), h + 1);
  }
  // largest finite + half an ulp ties to the even neighbour: infinity
  EXPECT_EQ(bf16_from_f32(std::bit_cast<float>(0x7F7F8000u)), 0x7F80);
  EXPECT_EQ(bf16_from_f32(std::bit_cast<float>(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(bf16_from_f32(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(round_bf16(1.00390625f), 1.0f);  // 1 + 2^-8: tie to even
  EXPECT_EQ(round_bf16(1.01171875f), 1.015625f);  // 1 + 3*2^-8: tie up to even
}

TEST(FormatF16, RoundTripsAndTiesToEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = f16_to_f32(uint16_t(h)), want = oracle_f16(uint16_t(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(v)) << h;
      EXPECT_TRUE(std::isnan(f16_to_f32(f16_from_f32(v)))) << h;
      continue;
    }
    ASSERT_EQ(v, want) << h;
    ASSERT_EQ(std::signbit(v), (h & 0x8000) != 0) << h;
    ASSERT_EQ(f16_from_f32(v), h) << h;
    if ((h & 0x7FFF) >= 0x7C00) continue;
    const float next = f16_to_f32(uint16_t(h + 1));  // next magnitude; 0x7BFF -> inf
    if (std::isinf(next)) {
      EXPECT_EQ(f16_from_f32((h & 0x8000) ? -65520.0f : 65520.0f), uint16_t(h + 1)) << h;  // tie -> even = inf
      EXPECT_EQ(f16_from_f32((h & 0x8000) ? -65519.99f : 65519.99f), h) << h;
      continue;
    }
    const double mid = (double(v) + double(next)) / 2.0;
    const float midf = float(mid);
    ASSERT_EQ(double(midf), mid);
    const uint16_t even = uint16_t((h & 1) ? h + 1 : h);
    ASSERT_EQ(f16_from_f32(midf), even) << "between " << h << " and " << h + 1;
    ASSERT_EQ(f16_from_f32(std::nextafter(midf, v)), h);
    ASSERT_EQ(f16_from_f32(std::nextafter(midf, next)), h + 1);
  }
  EXPECT_EQ(f16_from_f32(1e-9f), 0x0000);
  EXPECT_EQ(f16_from_f32(-1e-9f), 0x8000);
  EXPECT_EQ(f16_from_f32(1e9f), 0x7C00);
}

TEST(FormatActivation, ReadsAndWritesEachDtype) {
  std::mt19937 rng(fresh_seed());
  std::normal_distribution<float> normal(0.0f, 100.0f);
  float f32[64];
  uint16_t b16[64], h16[64];
  for (int i = 0; i < 64; ++i) {
    const float v = normal(rng);
    detail::write_activation(f32, DType::f32, i, v);
    detail::write_activation(b16, DType::bf16, i, v);
    detail::write_activation(h16, DType::f16, i, v);
    EXPECT_EQ(detail::read_activation(f32, DType::f32, i), v);
    EXPECT_EQ(detail::read_activation(b16, DType::bf16, i), bf16_to_f32(bf16_from_f32(v)));
    EXPECT_EQ(detail::read_activation(h16, DType::f16, i), oracle_f16(f16_from_f32(v)));
    // nearest: no representable value between v and what was stored
    const float rb = detail::read_activation(b16, DType::bf16, i);
    EXPECT_LE(std::fabs(rb - v), std::fabs(v) * std::ldexp(1.0f, -8));
  }
  EXPECT_THROW(detail::read_activation(f32, DType::i32, 0), Error);
}

// ===========================================================================
// NVFP4
// ===========================================================================
// Hand-worked blocks (gs = 1 unless said):
//  A  = the 16 e2m1 values 0..6, -0..-6. amax 6, 6*(1/6) = 1 in fp32, s = e4m3(1) = 0x38,
//       inv = 1: codes 0..15 in order, bytes 0x10 0x32 0x54 0x76 0x98 0xBA 0xDC 0xFE.
//  B  = 1, 0.3, 0.1, -0.7, then zeros. amax 1, t = 1/6 = 0.16666667; the e4m3 quantum in
//       [0.125, 0.25) is 2^-6, 0.1667/2^-6 = 10.67 -> 11 -> s = 0.171875 = 1.375*2^-3 = 0x23.
//       inv = 1/0.171875 = 5.8181820: 1 -> 5.82 -> 6 (7); 0.3 -> 1.745 -> 1.5 (3);
//       0.1 -> 0.582 -> 0.5 (1); -0.7 -> -4.07 -> -4 (14). Bytes 0x37 0xE1 0 ...
//  C  = 0.006, 0.001, -0.002, zeros. t = 0.001 = 0.512 * 2^-9 -> subnormal 1 * 2^-9 (0x01);
//       inv = 512: 3.07 -> 3 (5); 0.512 -> 0.5 (1); -1.02 -> -1 (10). Bytes 0x15 0x0A 0 ...
//  D  = 1e-5 and -1e-5: t = 1.67e-6 < 2^-10 -> s = 0, inv = 0: x*0 = +-0 -> codes 0 and 8.
//  E  = gs = 16, block of 2 and -1.5 and zeros: t = 1/3, 16/3 = 5.33 in [4, 8) quantum
//       0.5 -> 5.5 (0x4B = e 9, m 3); inv = 1/(5.5 * 0.0625) = 2.9090910:
//       2 -> 5.82 -> 6 (7); -1.5 -> -4.36 -> -4 (14). Bytes 0xE7 0 ...
TEST(FormatNvfp4, HandWorkedBlocks) {
  std::vector<float> x(5 * 16, 0.0f);
  for (int c = 0; c < 16; ++c) x[size_t(c)] = oracle_e2m1(uint8_t(c));
  x[16] = 1.0f, x[17] = 0.3f, x[18] = 0.1f, x[19] = -0.7f;
  x[32] = 0.006f, x[33] = 0.001f, x[34] = -0.002f;
  x[48] = 1e-5f, x[49] = -1e-5f;
  x[64] = 2.0f, x[65] = -1.5f;
  uint8_t data[40], scale[5];
  detail::nvfp4_quantize_rows(x.data(), 4, 16, 1.0f, data, scale);
  detail::nvfp4_quantize_rows(x.data() + 64, 1, 16, 16.0f, data + 32, scale + 4);
  const uint8_t want_scale[5] = {0x38, 0x23, 0x01, 0x00, 0x4B};
  const uint8_t want_data[40] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,  //
                                 0x37, 0xE1, 0, 0, 0, 0, 0, 0,                    //
                                 0x15, 0x0A, 0, 0, 0, 0, 0, 0,                    //
                                 0x80, 0, 0, 0, 0, 0, 0, 0,                       //
                                 0xE7, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(scale[i], want_scale[i]) << "block " << i;
  for (int i = 0; i < 40; ++i) EXPECT_EQ(data[i], want_data[i]) << "byte " << i;

  // dequantization of block B with dq 2: e2m1 * 0.171875 * 2
  float out[16];
  detail::nvfp4_dequantize_rows(data + 8, scale + 1, 1, 16, 2.0f, out);
  EXPECT_EQ(out[0], 6.0f * 0.171875f * 2.0f);
  EXPECT_EQ(out[1], 1.5f * 0.171875f * 2.0f);
  EXPECT_EQ(out[2], 0.5f * 0.171875f * 2.0f);
  EXPECT_EQ(out[3], -4.0f * 0.171875f * 2.0f);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(out[i], 0.0f);
}

TEST(FormatNvfp4, QuantizeMatchesOracleBitExact) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> rows_d(1, 9), kb_d(1, 12), gs_kind(0, 2);
  std::uniform_real_distribution<float> expo(-4.0f, 4.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t rows = rows_d(rng), K = 16 * kb_d(rng);
    const std::vector<float> x = random_tensor(rng, rows, K, 16);
    const float amax = amax_of(x);
    // weight-style global scale (amax maps to 6*448), or an arbitrary one
    const int kind = gs_kind(rng);
    const float gs = kind == 0 ? 1.0f / detail::nvfp4_weight_dq_scale(amax)
                   : kind == 1 ? 1.0f
                               : std::pow(10.0f, expo(rng));
    std::vector<uint8_t> data(size_t(rows * K / 2), 0xA5), scale(size_t(rows * K / 16), 0xA5);
    detail::nvfp4_quantize_rows(x.data(), rows, K, gs, data.data(), scale.data());
    const Quantized want = oracle_nvfp4(x, rows, K, gs);
    ASSERT_EQ(scale, want.scale) << "trial " << trial << " gs " << gs;
    ASSERT_EQ(data, want.data) << "trial " << trial << " gs " << gs;
  }
}

// Random data almost never lands within an ulp of an e2m1 threshold, so a quantizer that
// computes inv in another (mathematically equal) order would pass the test above. Here
// every element but the block's amax is placed at t / inv or an ulp or two away from it,
// for every e2m1 tie t, with inv computed as the SPEC orders it.
TEST(FormatNvfp4, QuantizeMatchesOracleAtTies) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> expo(-6.0f, 6.0f), mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> tie_d(0, 6), nudge(-2, 2), sign(0, 1);
  const float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const int64_t blocks = 64;
  for (int trial = 0; trial < 200; ++trial) {
    const float gs = mant(rng) * std::pow(10.0f, expo(rng) / 2.0f);
    std::vector<float> x(size_t(blocks * 16));
    for (int64_t b = 0; b < blocks; ++b) {
      float* xb = &x[size_t(b * 16)];
      const float amax = mant(rng) * std::pow(2.0f, expo(rng)) / gs;
      const float sv = oracle_e4m3(oracle_e4m3_encode(gs * (amax * (1.0f / 6.0f))));
      const float inv = sv == 0.0f ? 0.0f : 1.0f / (sv * (1.0f / gs));
      xb[0] = amax;
      for (int i = 1; i < 16; ++i) {
        float v = inv == 0.0f ? 0.0f : ties[tie_d(rng)] / inv;
        for (int n = nudge(rng); n != 0; n += n > 0 ? -1 : 1) v = std::nextafter(v, n > 0 ? 1e30f : 0.0f);
        v = std::min(v, amax);
        xb[i] = sign(rng) ? -v : v;
      }
    }
    std::vector<uint8_t> data(x.size() / 2, 0xA5), scale(x.size() / 16, 0xA5);
    detail::nvfp4_quantize_rows(x.data(), blocks, 16, gs, data.data(), scale.data());
    const Quantized want = oracle_nvfp4(x, blocks, 16, gs);
    ASSERT_EQ(scale, want.scale) << "trial " << trial << " gs " << gs;
    ASSERT_EQ(data, want.data) << "trial " << trial << " gs " << gs;
  }
}

TEST(FormatNvfp4, WeightDqScale) {
  EXPECT_EQ(detail::nvfp4_weight_dq_scale(2688.0f), 1.0f);
  EXPECT_EQ(detail::nvfp4_weight_dq_scale(3.5f), 3.5f / 2688.0f);
  EXPECT_EQ(detail::nvfp4_weight_dq_scale(0.0f), 1.0f);  // all-zero tensor: gs stays finite
  // with gs = 1/dq the largest block of the tensor gets the largest scale, 448
  std::vector<float> x(16, 0.0f);
  x[3] = -0.37f;
  const float gs = 1.0f / detail::nvfp4_weight_dq_scale(0.37f);
  uint8_t data[8], scale[1];
  detail::nvfp4_quantize_rows(x.data(), 1, 16, gs, data, scale);
  EXPECT_EQ(scale[0], 0x7E);
  EXPECT_EQ(data[1] >> 4, 15);  // -6
}

// |x - x̂| for x̂ = e2m1(q) * s * dq. With y = x / (s * dq) (the position of x on the
// e2m1 grid of its block), rounding to the nearest e2m1 value costs at most half a step
// at |y|, saturation costs |y| - 6 when the e4m3 scale rounded down (|y| up to 6 * 16/15
// for a normal scale, more for subnormal scales); a few fp32 roundings add a relative
// 2^-20. A block whose scale rounds to 0 has amax * gs / 6 <= 2^-10 and dequantizes to 0.
TEST(FormatNvfp4, DequantizeErrorIsBounded) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> expo(-3.0f, 3.0f);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t rows = 4, K = 256;
    const std::vector<float> x = random_tensor(rng, rows, K, 16);
    const float gs = trial % 2 ? 1.0f / detail::nvfp4_weight_dq_scale(amax_of(x)) : std::pow(10.0f, expo(rng));
    const float dq = 1.0f / gs;
    std::vector<uint8_t> data(size_t(rows * K / 2)), scale(size_t(rows * K / 16));
    detail::nvfp4_quantize_rows(x.data(), rows, K, gs, data.data(), scale.data());
    std::vector<float> xh(x.size(), std::numeric_limits<float>::quiet_NaN());
    detail::nvfp4_dequantize_rows(data.data(), scale.data(), rows, K, dq, xh.data());
    std::vector<float> fq(x.size(), std::numeric_limits<float>::quiet_NaN());
    for (int64_t r = 0; r < rows; ++r) detail::nvfp4_fake_quant(&x[size_t(r * K)], K, gs, dq, &fq[size_t(r * K)]);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(fq[i], xh[i]) << "fake_quant differs at " << i;
      const double s = oracle_e4m3(scale[i / 16]) * double(dq);
      const double err = std::fabs(double(x[i]) - double(xh[i]));
      if (s == 0.0) {
        ASSERT_EQ(xh[i], 0.0f);
        ASSERT_LE(std::fabs(x[i]), 6.0 * std::ldexp(1.0, -10) * dq * (1 + 1e-6)) << i;
        continue;
      }
      const double y = std::fabs(double(x[i])) / s;
      const double bound = s * (e2m1_half_step(std::min(y * (1 + 1e-6), 6.0)) + std::max(0.0, y - 6.0)) +
                           std::fabs(double(x[i])) * std::ldexp(1.0, -20) + 1e-44;
      ASSERT_LE(err, bound) << "x " << x[i] << " x^ " << xh[i] << " s " << s << " trial " << trial;
    }
  }
}

// fake_quant writes block by block, so it may run in place.
TEST(FormatNvfp4, FakeQuantInPlace) {
  std::mt19937 rng(fresh_seed());
  std::vector<float> x = random_tensor(rng, 1, 128, 16), y(128);
  const float gs = 1.0f / detail::nvfp4_weight_dq_scale(amax_of(x)), dq = 1.0f / gs;
  detail::nvfp4_fake_quant(x.data(), 128, gs, dq, y.data());
  detail::nvfp4_fake_quant(x.data(), 128, gs, dq, x.data());
  for (int i = 0; i < 128; ++i) ASSERT_EQ(x[size_t(i)], y[size_t(i)]) << i;
}

// ===========================================================================
// MXFP4
// ===========================================================================
// Hand-worked blocks of 32:
//  A  = 0..6, -0..-6, then zeros: amax 6, floor(log2 6) = 2, e = 0, code 127; codes = identity.
//  B  = 1, 0.3, 0.1, 7: amax 7, e = 0 -> 7 saturates to 6 (7); 1 -> 1 (2); 0.3 -> 0.5 (1);
//       0.1 -> 0 (0). Bytes 0x12 0x70.
//  C  = 1, 0.3, 0.1, -0.26: amax 1, e = -2 (0.25, code 125): 4 (6), 1.2 -> 1 (2),
//       0.4 -> 0.5 (1), -1.04 -> -1 (10). Bytes 0x26 0xA1.
//  D  = zeros: code 0 (2^-127) and zero data.
//  E  = 1e-39 (fp32 subnormal, floor(log2) = -130): e = -132 clamps to -127 (code 0);
//       1e-39 * 2^127 = 0.17 -> 0.
//  F  = 3e38: floor(log2) = 127, e = 125 (code 252); 3e38 / 2^125 = 7.05 -> 6 (7).
TEST(FormatMxfp4, HandWorkedBlocks) {
  std::vector<float> x(6 * 32, 0.0f);
  for (int c = 0; c < 16; ++c) x[size_t(c)] = oracle_e2m1(uint8_t(c));
  x[32] = 1.0f, x[33] = 0.3f, x[34] = 0.1f, x[35] = 7.0f;
  x[64] = 1.0f, x[65] = 0.3f, x[66] = 0.1f, x[67] = -0.26f;
  x[128] = 1e-39f;
  x[160] = 3e38f;
  uint8_t data[96], scale[6];
  detail::mxfp4_quantize_rows(x.data(), 2, 96, data, scale);
  const uint8_t want_scale[6] = {127, 127, 125, 0, 0, 252};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(scale[i], want_scale[i]) << "block " << i;
  const uint8_t want_a[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(data[i], want_a[i]) << "byte " << i;
  EXPECT_EQ(data[16], 0x12);
  EXPECT_EQ(data[17], 0x70);
  EXPECT_EQ(data[32], 0x26);
  EXPECT_EQ(data[33], 0xA1);
  EXPECT_EQ(data[64], 0x00);
  EXPECT_EQ(data[80], 0x07);
  float out[192];
  detail::mxfp4_dequantize_rows(data, scale, 2, 96, out);
  EXPECT_EQ(out[64], 1.0f);
  EXPECT_EQ(out[65], 0.25f);
  EXPECT_EQ(out[66], 0.125f);
  EXPECT_EQ(out[67], -0.25f);
  EXPECT_EQ(out[160], 6.0f * std::ldexp(1.0f, 125));
  EXPECT_EQ(out[128], 0.0f);
}

TEST(FormatMxfp4, QuantizeMatchesOracleBitExact) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> rows_d(1, 9), kb_d(1, 8);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t rows = rows_d(rng), K = 32 * kb_d(rng);
    std::vector<float> x = random_tensor(rng, rows, K, 32);
    if (trial % 10 == 0) x[0] = 1e-42f;   // fp32 subnormal amax in the first block
    if (trial % 10 == 1) x[0] = -3e38f;   // top of the e8m0 range
    std::vector<uint8_t> data(size_t(rows * K / 2), 0xA5), scale(size_t(rows * K / 32), 0xA5);
    detail::mxfp4_quantize_rows(x.data(), rows, K, data.data(), scale.data());
    const Quantized want = oracle_mxfp4(x, rows, K);
    ASSERT_EQ(scale, want.scale) << "trial " << trial;
    ASSERT_EQ(data, want.data) << "trial " << trial;
  }
}

// ===========================================================================
// NaN in activations
// ===========================================================================
// NaN has no e2m1 code (SPEC §1): it makes its token's output undefined, yet host and
// device quantizers must write the same bytes. A block's amax skips NaN elements, quiet
// or signalling, of either sign, wherever they sit; the NaN element encodes to +6. (glibc's
// fmaxf returns NaN for a signalling NaN operand, IEEE 754-2008 maxNum, so an fmaxf chain
// forgot every element before one; CUDA's fmaxf skips it.) Checked for every position of
// the NaN and of the block's largest element, against the oracle on the block with the
// NaN replaced by 0.
const uint32_t kNaNs[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FA5A5A5u};

// Nibble i of packed data (low nibble first) set to code.
void set_nibble(std::vector<uint8_t>& data, int i, uint8_t code) {
  uint8_t& b = data[size_t(i / 2)];
  b = uint8_t(i % 2 ? (b & 0x0F) | (code << 4) : (b & 0xF0) | code);
}

std::string nan_case(uint32_t bits, int p, int m) {
  char s[64];
  std::snprintf(s, sizeof s, "NaN 0x%08X at %d, amax at %d", bits, p, m);
  return s;
}

TEST(FormatNvfp4, NaNElementsDoNotRaiseAmax) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint32_t bits : kNaNs)
    for (int p = 0; p < 16; ++p)
      for (int m = 0; m < 16; ++m) {
        if (m == p) continue;
        std::vector<float> x(16);
        for (float& v : x) v = normal(rng);
        x[size_t(m)] = 6.0f * (normal(rng) < 0 ? -1.0f : 1.0f);  // the block's amax (scale 358.4, not saturated)
        const float gs = 2688.0f / 7.5f;
        x[size_t(p)] = 0.0f;
        Quantized want = oracle_nvfp4(x, 1, 16, gs);
        set_nibble(want.data, p, 7);
        std::vector<float> fq_want(16);
        detail::nvfp4_fake_quant(x.data(), 16, gs, 1.0f / gs, fq_want.data());
        x[size_t(p)] = bits_f32(bits);
        Quantized got{std::vector<uint8_t>(8), std::vector<uint8_t>(1)};
        detail::nvfp4_quantize_rows(x.data(), 1, 16, gs, got.data.data(), got.scale.data());
        SCOPED_TRACE(nan_case(bits, p, m));
        ASSERT_EQ(got.scale, want.scale);
        ASSERT_EQ(got.data, want.data);
        // the W4A4 round trip (reference and CPU backend): the other elements as without the NaN
        std::vector<float> fq(16);
        detail::nvfp4_fake_quant(x.data(), 16, gs, 1.0f / gs, fq.data());
        for (int i = 0; i < 16; ++i)
          if (i != p) ASSERT_EQ(fq[size_t(i)], fq_want[size_t(i)]) << "fake quant element " << i;
      }
}

TEST(FormatMxfp4, NaNElementsDoNotRaiseAmax) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint32_t bits : kNaNs)
    for (int p = 0; p < 32; ++p)
      for (int m = 0; m < 32; ++m) {
        if (m == p) continue;
        std::vector<float> x(32);
        for (float& v : x) v = normal(rng);
        x[size_t(m)] = 8.0f * (normal(rng) < 0 ? -1.0f : 1.0f);
        x[size_t(p)] = 0.0f;
        Quantized want = oracle_mxfp4(x, 1, 32);
        set_nibble(want.data, p, 7);
        x[size_t(p)] = bits_f32(bits);
        Quantized got{std::vector<uint8_t>(16), std::vector<uint8_t>(1)};
        detail::mxfp4_quantize_rows(x.data(), 1, 32, got.data.data(), got.scale.data());
        SCOPED_TRACE(nan_case(bits, p, m));
        ASSERT_EQ(got.scale, want.scale);
        ASSERT_EQ(got.data, want.data);
      }
}

// y = x / 2^e is exact and |y| < 2^(floor(log2 amax) + 1 - e) = 8, so the error is at most
// 2^e * (half a step at |y| + saturation |y| - 6), exactly (no other rounding).
TEST(FormatMxfp4, DequantizeErrorIsBounded) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t rows = 4, K = 256;
    const std::vector<float> x = random_tensor(rng, rows, K, 32);
    std::vector<uint8_t> data(size_t(rows * K / 2)), scale(size_t(rows * K / 32));
    detail::mxfp4_quantize_rows(x.data(), rows, K, data.data(), scale.data());
    std::vector<float> xh(x.size(), std::numeric_limits<float>::quiet_NaN());
    detail::mxfp4_dequantize_rows(data.data(), scale.data(), rows, K, xh.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double s = std::ldexp(1.0, int(scale[i / 32]) - 127);
      const double y = std::fabs(double(x[i])) / s;
      ASSERT_LT(y, 8.0);
      const double bound = s * (e2m1_half_step(std::min(y, 6.0)) + std::max(0.0, y - 6.0));
      ASSERT_LE(std::fabs(double(x[i]) - double(xh[i])), bound) << "x " << x[i] << " x^ " << xh[i];
    }
  }
}

// ===========================================================================
// Swizzled 128x4 scale layout
// ===========================================================================
// The layout enumerated structurally: 512-byte tiles of 128 rows x 4 columns, tiles in
// row-major order over (R/128, C/4); inside a tile the bytes run over (row % 32,
// (row / 32) % 4, column % 4), the last fastest.
TEST(FormatSwizzle, OffsetMatchesEnumeration) {
  for (int64_t R : {1, 127, 128, 129, 300}) {
    for (int64_t C : {1, 3, 4, 5, 17}) {
      const int64_t Rp = (R + 127) / 128 * 128, Cp = (C + 3) / 4 * 4;
      ASSERT_EQ(swizzle_pad_rows(R), Rp);
      ASSERT_EQ(swizzle_pad_cols(C), Cp);
      std::vector<int> hits(size_t(Rp * Cp), 0);
      int64_t offset = 0;
      for (int64_t rt = 0; rt < Rp / 128; ++rt)
        for (int64_t ct = 0; ct < Cp / 4; ++ct)
          for (int64_t i = 0; i < 32; ++i)
            for (int64_t j = 0; j < 4; ++j)
              for (int64_t k = 0; k < 4; ++k, ++offset) {
                const int64_t r = rt * 128 + j * 32 + i, c = ct * 4 + k;
                ASSERT_EQ(swizzled_scale_offset(r, c, Cp), offset) << "r " << r << " c " << c;
                ++hits[size_t(offset)];
              }
      ASSERT_EQ(offset, Rp * Cp);
      for (int h : hits) ASSERT_EQ(h, 1);
    }
  }
}

TEST(FormatSwizzle, RoundTripsWithZeroPadding) {
  std::mt19937 rng(fresh_seed());
  std::uniform_int_distribution<int> byte(1, 255);  // nonzero, so padding is told apart
  for (int64_t R : {1, 127, 128, 129, 300}) {
    for (int64_t C : {1, 3, 4, 5, 17}) {
      const int64_t Rp = swizzle_pad_rows(R), Cp = swizzle_pad_cols(C);
      std::vector<uint8_t> in(size_t(R * C));
      for (auto& b : in) b = uint8_t(byte(rng));
      std::vector<uint8_t> sw(size_t(Rp * Cp), 0xCD), back(size_t(R * C), 0);
      detail::swizzle_scale_matrix(in.data(), R, C, sw.data());
      for (int64_t r = 0; r < Rp; ++r)
        for (int64_t c = 0; c < Cp; ++c) {
          const uint8_t got = sw[size_t(swizzled_scale_offset(r, c, Cp))];
          ASSERT_EQ(got, r < R && c < C ? in[size_t(r * C + c)] : 0) << "R " << R << " C " << C << " r " << r << " c " << c;
        }
      detail::unswizzle_scale_matrix(sw.data(), R, C, back.data());
      ASSERT_EQ(back, in) << "R " << R << " C " << C;
    }
  }
}

TEST(FormatSwizzle, TensorsWithExpertsBackToBack) {
  std::mt19937 rng(fresh_seed());
  std::uniform_int_distribution<int> byte(1, 255);
  const int64_t E = 3, R = 129, C = 5, Rp = 256, Cp = 8;
  std::vector<uint8_t> in(size_t(E * R * C));
  for (auto& b : in) b = uint8_t(byte(rng));
  std::vector<uint8_t> sw(size_t(E * Rp * Cp), 0xCD), back(in.size(), 0xCD);
  swizzle_scales(TensorView::of(in.data(), DType::e4m3, {E, R, C}), TensorView::of(sw.data(), DType::u8, {E, Rp * Cp}));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < Rp; ++r)
      for (int64_t c = 0; c < Cp; ++c) {
        const uint8_t got = sw[size_t(e * Rp * Cp + swizzled_scale_offset(r, c, Cp))];
        ASSERT_EQ(got, r < R && c < C ? in[size_t((e * R + r) * C + c)] : 0) << e << " " << r << " " << c;
      }
  unswizzle_scales(TensorView::of(sw.data(), DType::u8, {E, Rp * Cp}), TensorView::of(back.data(), DType::e4m3, {E, R, C}));
  EXPECT_EQ(back, in);
  // 4-D: two groups of experts
  std::vector<uint8_t> sw4(sw.size(), 0xCD);
  swizzle_scales(TensorView::of(in.data(), DType::e8m0, {1, E, R, C}), TensorView::of(sw4.data(), DType::u8, {1, E, Rp * Cp}));
  EXPECT_EQ(sw4, sw);
}

// ===========================================================================
// Public tensor functions
// ===========================================================================
TEST(FormatTensor, QuantizeDequantizeEachDtype) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t E = 2, R = 3, K = 64;
  const std::vector<float> xf = random_tensor(rng, E * R, K, 32);
  const float gs = 1.0f / detail::nvfp4_weight_dq_scale(amax_of(xf));
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<uint8_t> xbuf(xf.size() * 4);
    std::vector<float> xr(xf.size());  // x as the tensor holds it
    for (size_t i = 0; i < xf.size(); ++i) {
      detail::write_activation(xbuf.data(), dt, int64_t(i), xf[i]);
      xr[i] = detail::read_activation(xbuf.data(), dt, int64_t(i));
    }
    const TensorView x = TensorView::of(xbuf.data(), dt, {E, R, K});
    // NVFP4
    std::vector<uint8_t> data(size_t(E * R * K / 2), 0xA5), scale(size_t(E * R * K / 16), 0xA5);
    quantize_nvfp4(x, gs, TensorView::of(data.data(), DType::u8, {E, R, K / 2}),
                   TensorView::of(scale.data(), DType::e4m3, {E, R, K / 16}));
    const Quantized want = oracle_nvfp4(xr, E * R, K, gs);
    EXPECT_EQ(data, want.data);
    EXPECT_EQ(scale, want.scale);
    std::vector<uint8_t> obuf(xbuf.size(), 0xA5);
    dequantize_nvfp4(TensorView::of(data.data(), DType::u8, {E, R, K / 2}),
                     TensorView::of(scale.data(), DType::e4m3, {E, R, K / 16}), 1.0f / gs,
                     TensorView::of(obuf.data(), dt, {E, R, K}));
    for (int64_t i = 0; i < E * R * K; ++i) {
      const uint8_t b = want.data[size_t(i / 2)];
      const float v = (oracle_e2m1(uint8_t(i % 2 ? b >> 4 : b & 15)) * oracle_e4m3(want.scale[size_t(i / 16)])) * (1.0f / gs);
      float stored;
      if (dt == DType::f32) stored = v;
      else if (dt == DType::bf16) stored = bf16_to_f32(bf16_from_f32(v));
      else stored = oracle_f16(f16_from_f32(v));
      ASSERT_EQ(detail::read_activation(obuf.data(), dt, i), stored) << i;
    }
    for (size_t i = size_t(E * R * K) * dtype_size(dt); i < obuf.size(); ++i) ASSERT_EQ(obuf[i], 0xA5);
    // MXFP4
    std::vector<uint8_t> mdata(size_t(E * R * K / 2), 0xA5), mscale(size_t(E * R * K / 32), 0xA5);
    quantize_mxfp4(x, TensorView::of(mdata.data(), DType::u8, {E, R, K / 2}),
                   TensorView::of(mscale.data(), DType::e8m0, {E, R, K / 32}));
    const Quantized mwant = oracle_mxfp4(xr, E * R, K);
    EXPECT_EQ(mdata, mwant.data);
    EXPECT_EQ(mscale, mwant.scale);
    std::vector<float> mout(size_t(E * R * K), std::numeric_limits<float>::quiet_NaN());
    dequantize_mxfp4(TensorView::of(mdata.data(), DType::u8, {E, R, K / 2}),
                     TensorView::of(mscale.data(), DType::e8m0, {E, R, K / 32}),
                     TensorView::of(mout.data(), DType::f32, {E, R, K}));
    for (int64_t i = 0; i < E * R * K; ++i) {
      const uint8_t b = mwant.data[size_t(i / 2)];
      ASSERT_EQ(mout[size_t(i)], oracle_e2m1(uint8_t(i % 2 ? b >> 4 : b & 15)) * oracle_e8m0(mwant.scale[size_t(i / 32)]));
    }
  }
}

// Runs f, which must throw Error of `kind` whose message contains every piece.
template <class F>
void expect_error(F f, ErrorKind kind, std::initializer_list<const char*> pieces) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    for (const char* p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(FormatTensor, BadArgumentsNameTheArgument) {
  std::vector<float> x(4 * 64, 1.0f);
  std::vector<uint8_t> data(4 * 32, 0xA5), scale(4 * 4, 0xA5), scale32(4 * 2, 0xA5), out16(4 * 64 * 2, 0xA5);
  const auto X = TensorView::of(x.data(), DType::f32, {4, 64});
  const auto D = TensorView::of(data.data(), DType::u8, {4, 32});
  const auto S = TensorView::of(scale.data(), DType::e4m3, {4, 4});
  const auto S32 = TensorView::of(scale32.data(), DType::e8m0, {4, 2});
  const ErrorKind bad = ErrorKind::invalid_argument;

  // quantize_nvfp4
  expect_error([&] { quantize_nvfp4(X, 1.0f, D, TensorView::of(scale.data(), DType::u8, {4, 4})); }, bad,
               {"quantize_nvfp4", "scale", "u8[4, 4]", "e4m3[4, 4]"});
  expect_error([&] { quantize_nvfp4(X, 1.0f, D, TensorView::of(scale.data(), DType::e4m3, {4, 3})); }, bad,
               {"quantize_nvfp4", "scale", "e4m3[4, 3]", "e4m3[4, 4]"});
  expect_error([&] { quantize_nvfp4(X, 1.0f, TensorView::of(data.data(), DType::u8, {4, 31}), S); }, bad,
               {"quantize_nvfp4", "data", "[4, 31]", "[4, 32]"});
  expect_error([&] { quantize_nvfp4(TensorView::of(x.data(), DType::f32, {4, 40}), 1.0f, D, S); }, bad,
               {"quantize_nvfp4", "x", "[4, 40]", "16"});
  expect_error([&] { quantize_nvfp4(TensorView::of(x.data(), DType::i32, {4, 64}), 1.0f, D, S); }, bad,
               {"quantize_nvfp4", "x", "i32"});
  expect_error([&] { quantize_nvfp4(X, std::numeric_limits<float>::infinity(), D, S); }, bad,
               {"quantize_nvfp4", "q_scale", "inf"});
  expect_error([&] { quantize_nvfp4(X, std::numeric_limits<float>::quiet_NaN(), D, S); }, bad,
               {"quantize_nvfp4", "q_scale", "nan"});
  expect_error([&] { quantize_nvfp4(X, 0.0f, D, S); }, bad, {"quantize_nvfp4", "q_scale"});
  expect_error([&] { quantize_nvfp4(X, -2.0f, D, S); }, bad, {"quantize_nvfp4", "q_scale", "-2"});
  expect_error([&] { quantize_nvfp4(TensorView{}, 1.0f, D, S); }, bad, {"quantize_nvfp4", "x", "nothing"});
  expect_error([&] { quantize_nvfp4(X, 1.0f, D, TensorView{}); }, bad, {"quantize_nvfp4", "scale", "nothing"});
  expect_error([&] { quantize_nvfp4(X, 1.0f, TensorView::of(x.data(), DType::u8, {4, 32}), S); }, bad,
               {"quantize_nvfp4", "data", "x"});  // output overlaps the input
  {
    TensorView strided = X;  // every other row of an (8, 64) buffer
    strided.stride[0] = 128;
    std::vector<float> big(8 * 64);
    strided.data = big.data();
    expect_error([&] { quantize_nvfp4(strided, 1.0f, D, S); }, bad, {"quantize_nvfp4", "x", "contiguous"});
  }
  {
    // A CUDA input: refused in a build without CUDA; in a build with it, every other
    // tensor must be on the same device (checked before any CUDA call, so this runs
    // without a GPU too). These views point at host memory and are never read.
    const auto Xc = TensorView::of(x.data(), DType::f32, {4, 64}, DeviceType::cuda, 0);
    const auto Dc = TensorView::of(data.data(), DType::u8, {4, 32}, DeviceType::cuda, 0);
    const auto Sc = TensorView::of(scale.data(), DType::e4m3, {4, 4}, DeviceType::cuda, 0);
#if defined(FP4MOE_WITH_CUDA)
    expect_error([&] { quantize_nvfp4(Xc, 1.0f, D, S); }, bad, {"quantize_nvfp4", "data", "on cpu", "on cuda:0"});
    expect_error([&] { quantize_nvfp4(Xc, 1.0f, Dc, S); }, bad, {"quantize_nvfp4", "scale", "on cpu", "on cuda:0"});
    expect_error([&] { quantize_nvfp4(X, 1.0f, Dc, Sc); }, bad, {"quantize_nvfp4", "data", "on cuda:0", "on cpu"});
    expect_error([&] { quantize_nvfp4(Xc, 1.0f, TensorView::of(data.data(), DType::u8, {4, 32}, DeviceType::cuda, 1), Sc); },
                 bad, {"quantize_nvfp4", "data", "on cuda:1", "on cuda:0"});
    expect_error([&] { dequantize_nvfp4(Dc, Sc, 1.0f, TensorView::of(out16.data(), DType::bf16, {4, 64})); }, bad,
                 {"dequantize_nvfp4", "out", "on cpu", "on cuda:0"});
    expect_error([&] { dequantize_mxfp4(Dc, S32, TensorView::of(out16.data(), DType::bf16, {4, 64})); }, bad,
                 {"dequantize_mxfp4", "scale", "on cpu", "on cuda:0"});
    expect_error([&] { swizzle_scales(Sc, TensorView::of(data.data(), DType::u8, {512})); }, bad,
                 {"swizzle_scales", "swizzled", "on cpu", "on cuda:0"});
    // unswizzle runs where its input (swizzled) is: the output scale is the odd one out
    expect_error([&] { unswizzle_scales(TensorView::of(data.data(), DType::u8, {512}, DeviceType::cuda, 0), S); },
                 bad, {"unswizzle_scales", "scale", "on cpu", "on cuda:0"});
    // element alignment is checked (the kernels load whole elements)
    expect_error([&] {
      quantize_nvfp4(TensorView::of(reinterpret_cast<uint8_t*>(x.data()) + 2, DType::f32, {4, 64}, DeviceType::cuda, 0),
                     1.0f, Dc, Sc);
    }, bad, {"quantize_nvfp4", "x", "aligned to 4 bytes"});
#else
    expect_error([&] { quantize_nvfp4(Xc, 1.0f, D, S); }, ErrorKind::unsupported, {"quantize_nvfp4", "x", "CUDA"});
    expect_error([&] { dequantize_nvfp4(Dc, Sc, 1.0f, TensorView::of(out16.data(), DType::bf16, {4, 64})); },
                 ErrorKind::unsupported, {"dequantize_nvfp4", "data", "CUDA"});
    expect_error([&] { swizzle_scales(Sc, TensorView::of(data.data(), DType::u8, {512})); }, ErrorKind::unsupported,
                 {"swizzle_scales", "scale", "CUDA"});
#endif
    // a CUDA output for a CPU input is refused in every build
    expect_error([&] { quantize_nvfp4(X, 1.0f, Dc, S); }, bad, {"quantize_nvfp4", "data", "on cuda:0", "on cpu"});
    expect_error([&] { quantize_mxfp4(X, D, TensorView::of(scale32.data(), DType::e8m0, {4, 2}, DeviceType::cuda, 0)); },
                 bad, {"quantize_mxfp4", "scale", "on cuda:0", "on cpu"});
  }

  // dequantize_nvfp4
  const auto O = TensorView::of(out16.data(), DType::bf16, {4, 64});
  expect_error([&] { dequantize_nvfp4(D, S, 1.0f, TensorView::of(out16.data(), DType::bf16, {4, 32})); }, bad,
               {"dequantize_nvfp4", "out", "bf16[4, 32]", "[4, 64]"});
  expect_error([&] { dequantize_nvfp4(D, S32, 1.0f, O); }, bad, {"dequantize_nvfp4", "scale", "e8m0", "e4m3[4, 4]"});
  expect_error([&] { dequantize_nvfp4(TensorView::of(data.data(), DType::u8, {4, 12}), S, 1.0f, O); }, bad,
               {"dequantize_nvfp4", "data", "[4, 12]", "16"});
  expect_error([&] { dequantize_nvfp4(D, S, std::numeric_limits<float>::quiet_NaN(), O); }, bad,
               {"dequantize_nvfp4", "dq_scale"});
  expect_error([&] { dequantize_nvfp4(D, S, 1.0f, TensorView::of(out16.data(), DType::u8, {4, 64})); }, bad,
               {"dequantize_nvfp4", "out", "u8"});

  // quantize_mxfp4 / dequantize_mxfp4
  expect_error([&] { quantize_mxfp4(TensorView::of(x.data(), DType::f32, {4, 48}), D, S32); }, bad,
               {"quantize_mxfp4", "x", "[4, 48]", "32"});
  expect_error([&] { quantize_mxfp4(X, D, S); }, bad, {"quantize_mxfp4", "scale", "e4m3[4, 4]", "e8m0[4, 2]"});
  expect_error([&] { quantize_mxfp4(X, TensorView::of(data.data(), DType::u8, {2, 2, 32}), S32); }, bad,
               {"quantize_mxfp4", "data", "[2, 2, 32]", "[4, 32]"});
  expect_error([&] { dequantize_mxfp4(TensorView::of(data.data(), DType::u8, {4, 8}), S32, O); }, bad,
               {"dequantize_mxfp4", "data", "[4, 8]", "32"});
  expect_error([&] { dequantize_mxfp4(D, TensorView::of(scale32.data(), DType::e8m0, {4, 1}), O); }, bad,
               {"dequantize_mxfp4", "scale", "e8m0[4, 1]", "e8m0[4, 2]"});

  // swizzle_scales / unswizzle_scales
  std::vector<uint8_t> sw(128 * 4, 0xA5);
  expect_error([&] { swizzle_scales(S, TensorView::of(sw.data(), DType::u8, {128 * 4 - 1})); }, bad,
               {"swizzle_scales", "swizzled", "[511]", "[512]"});
  expect_error([&] { swizzle_scales(TensorView::of(scale.data(), DType::e4m3, {16}), TensorView::of(sw.data(), DType::u8, {512})); },
               bad, {"swizzle_scales", "scale", "[16]"});
  expect_error([&] { swizzle_scales(TensorView::of(x.data(), DType::f32, {4, 4}), TensorView::of(sw.data(), DType::u8, {512})); },
               bad, {"swizzle_scales", "scale", "f32"});
  expect_error([&] { unswizzle_scales(TensorView::of(sw.data(), DType::u8, {2, 256}), S); }, bad,
               {"unswizzle_scales", "swizzled", "[2, 256]", "[512]"});

  // nothing was written by any failing call
  for (uint8_t b : data) ASSERT_EQ(b, 0xA5);
  for (uint8_t b : scale) ASSERT_EQ(b, 0xA5);
  for (uint8_t b : scale32) ASSERT_EQ(b, 0xA5);
  for (uint8_t b : out16) ASSERT_EQ(b, 0xA5);
  for (uint8_t b : sw) ASSERT_EQ(b, 0xA5);
}

}  // namespace
