// The "cpu" backend: the layer of SPEC §4 on the host, multithreaded and vectorizable.
//
// Per forward:
//   1. group the (token, slot) pairs by local expert (a counting sort, serial: O(T k));
//   2. A: each token's GEMM 1 input row (bf16 round, router weight on input, W4A4 round trip);
//   3. GEMM 1: work item = (expert with rows, block of kRows intermediate rows): its gate and up
//      rows dotted with every row of the expert (register-blocked: a few weight rows x a few
//      tokens per pass over K, dots()), the weights decoded straight into the dots' registers
//      in each pass for an expert of at most fused_rows() rows, else once per item into the
//      thread's tile;
//      act + round_bf16 into Hs; then the W4A4 round trip of each Hs row;
//   4. GEMM 2 likewise into Ys (block of kRows output rows);
//   5. combine per token, slots j = 0..k-1 in fp32, one rounding to out's dtype.
//
// Exact in SPEC §4's sense, as the CUDA kernels are: the dots take the weights as e2m1 * block
// scale and, under W4A4, the activations as e2m1 * block scale too (both exact in fp32), so every
// product is exact; the sums are fp32, and each dot is multiplied once by its expert's weight
// dq_scale (and the activations' under W4A4). Against the reference, which multiplies each
// weight by dq before its product, only the rounding of the fp32 sums and of that one product
// differs.
//
// Deterministic: every element of A, Hs, Ys and out is computed by one thread in an order
// fixed by the code (the 16-lane reduction in dot() included), never depending on which
// thread took the item or how many threads there are.
//
// SIMD (FP4MOE_CPU_SIMD, simd_level): the scalar loops, AVX2 (with FMA) or AVX-512, the same
// bits on each. The blocked dots keep dot()'s 16 lane sums per (row, token) and its lane order,
// and every path looks the same weight values up in the same tables (kCodes). Where the CPU has
// AMX-BF16 (level amx, the default there), the experts of at least amx_rows_ rows run both GEMMs
// on its tiles instead (cpu_amx.hpp: the same exact products, the sums in the tiles' order, so
// other bits; deterministic all the same); the rest as AVX-512.
//
// Weights: HostWeights in the backend's own code order (cpu codes, cpu_codes.hpp: each group of
// 32 weights' codes ordered so that a 16-byte load widens into two sets of 16 in k order), which
// Layer::prepare converts in place (the entry's adopt) and create() copies when they are shared.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend.hpp"
#include "cpu/cpu_amx.hpp"
#include "cpu/cpu_codes.hpp"
#include "cpu/worker_pool.hpp"
#include "format/quant.hpp"
#include "fp4moe/format.h"

namespace fp4moe::detail {
namespace {

constexpr int64_t kRows = 16;    // weight rows per work item (dequantized once, reused per token)
constexpr int64_t kLanes = 16;   // independent fp32 partial sums in dot(); K is a multiple of 16
constexpr int64_t kChunk = 64;   // activation rows per call of dots() in a work item
// An expert with at most this many rows: its weights decoded in registers once per kP rows (the
// blocked dots' activation rows per pass), no tile. AVX-512 (kP 4) 16: with the cpu codes' decode
// 16-20% faster than 4 at qwen3-30b T = 64, the same at T = 300, where 64 (no tile below a chunk)
// lost 4% at T = 1000; AVX2 (kP 2, a dearer decode) 4: 16 lost 7% at T = 300, 8 6% at T = 64
// (v70, a 2-vCPU Xeon).
constexpr int64_t kFusedAvx512 = 16;
constexpr int64_t kFusedAvx2 = 4;  // and the scalar loops (which dequantize a tile either way)
constexpr size_t kAlign = 64;

// The backend's SIMD paths: none (the scalar loops), AVX2 (with FMA), or AVX-512 (F). The same
// bits on every level (tested).
enum class Simd { scalar, avx2, avx512 };

// Every code's value, e2m1 (the weights), e4m3 (NVFP4 scales) and e8m0 (MXFP4 scales): the
// format functions' own results, looked up; and for each scale code the 16 e2m1 values times
// that scale, the weights before their expert's dq_scale (exact products: at most 6 significant
// bits; an e8m0 scale of 2^127 overflows to inf as SPEC §2's own product does).
struct CodeTables {
  float e2m1[16], e4m3[256], e8m0[256];
  alignas(64) float nvfp4[256][16];
  alignas(64) float mxfp4[256][16];
  CodeTables() {
    for (int c = 0; c < 16; ++c) e2m1[c] = e2m1_to_f32(uint8_t(c));
    for (int s = 0; s < 256; ++s) {
      e4m3[s] = e4m3_to_f32(uint8_t(s));
      e8m0[s] = e8m0_to_f32(uint8_t(s));
      for (int c = 0; c < 16; ++c) {
        nvfp4[s][c] = e2m1[c] * e4m3[s];
        mxfp4[s][c] = e2m1[c] * e8m0[s];
      }
    }
  }
};
const CodeTables kCodes;

// The scaled code values of a format by its block (16: NVFP4, 32: MXFP4).
const float (*scaled_codes(int block))[16] { return block == kNvfp4Block ? kCodes.nvfp4 : kCodes.mxfp4; }

// dot()'s last step: its lanes added in order 0..kLanes-1.
float sum_lanes(const float (&lane)[kLanes]) {
  float s = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

// sum_k w[k] * a[k] over K (a multiple of kLanes): kLanes partial sums, lane j summing
// k = j mod kLanes in increasing k by fused multiply-adds, then lanes added 0..kLanes-1. Every
// path fuses (std::fma here), so every SIMD level gives the same bits; and every product is exact
// (a scaled e2m1 code times a bf16 value or, under W4A4, times another scaled code: at most 14
// significant bits, unless it underflows), so the fused multiply-add is SPEC §4's fp32 product
// then the sum.
__attribute__((target_clones("fma", "default"))) float dot(const float* w, const float* a, int64_t K) {
  float acc[kLanes] = {};
  for (int64_t k = 0; k < K; k += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] = std::fma(w[k + j], a[k + j], acc[j]);
  return sum_lanes(acc);
}

// n FP4 rows (data (n, K/2) u8 in cpu codes (cpu_codes.hpp), scale (n, K/block)) -> tile (n, K)
// f32: each weight e2m1 * scale, without the expert's dq_scale (the caller multiplies the dots by
// it). The forward's hot spot at small T, where each dequantized row meets few tokens.
void dequantize_scalar(const uint8_t* data, const uint8_t* scale, int block, int64_t K, int64_t n, float* tile) {
  const float(*tab)[16] = scaled_codes(block);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* q = data + r * (K / 2);
    const uint8_t* s = scale + r * (K / block);
    float* o = tile + r * K;
    for (int64_t k = 0; k < K; ++k) {
      const CpuCodeAt at = cpu_code_at(k, K);
      o[k] = tab[s[k / block]][(q[at.byte] >> at.shift) & 15];
    }
  }
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------------------------
// The SIMD paths. Weights reach the blocked dots from a "source": rows of a dequantized tile, or
// the FP4 rows themselves, decoded in registers (an expert with few rows, where a tile's store
// and reload would cost more than the dots). Both give the same values, so the same bits.
// ---------------------------------------------------------------------------------------------
#define FP4MOE_AVX512 __attribute__((target("avx512f,fma"), always_inline)) inline
#define FP4MOE_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

// Row r of FP4 rows (q, s of row 0): K/2 code bytes (cpu codes) and K >> kShift scale bytes a
// row; kShift is log2 of the block, 4 (NVFP4) or 5 (MXFP4).
template <int kShift>
struct CodeRows {
  const uint8_t* q;
  const uint8_t* s;
  int64_t K;
  const float (*tab)[16];

  CodeRows rows(int64_t r) const { return {q + r * (K / 2), s + r * (K >> kShift), K, tab}; }
  const uint8_t* codes(int r, int64_t k) const { return q + r * (K / 2) + k / 2; }
  const float* table(int r, int64_t k) const { return tab[s[r * (K >> kShift) + (k >> kShift)]]; }
  // At k a multiple of 128: the codes (and at a multiple of 64 blocks, the scales) kAhead weights
  // past row r's k into the caches: 4 KiB of codes ahead, where the next rows' are (rows are
  // contiguous), or past the matrix (a prefetch does not fault). Measured on a 2-vCPU Xeon: the
  // dots from the FP4 rows ran at 4 GB/s of codes a thread without, 6.6 with.
  // (always inlined: GCC takes a function that only prefetches for one without effects and drops
  // its calls)
  __attribute__((always_inline)) void prefetch(int r, int64_t k) const {
    const int64_t at = k + kAhead;
    __builtin_prefetch(codes(r, at));
    if ((at & ((int64_t(64) << kShift) - 1)) == 0) __builtin_prefetch(s + r * (K >> kShift) + (at >> kShift));
  }
  static constexpr int64_t kAhead = 8192;
};

// AVX-512, a group of 32 weights (16 bytes of cpu codes at `codes`): the bytes widened to 16
// 32-bit lanes, and one permute each (which reads a lane's low 4 bits: the code) looks weights
// 0-15 (the low nibbles) up in `lo`, the block of weights 0-15's 16 scaled values, and weights
// 16-31 (the lanes shifted right by 4) in `hi`. 3 vector instructions per 16 weights where the
// canonical pairs took 5 (v70, a 2-vCPU Xeon: a 4-row dot loop 1.4x as fast on codes in the
// caches, 1.1x from memory).
FP4MOE_AVX512 void avx512_decode32(const uint8_t* codes, const float* lo, const float* hi, __m512& v0, __m512& v1) {
  // (the maskz forms with every lane on: GCC 12's unmasked ones warn of an uninitialized source)
  const __m512i x = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  v0 = _mm512_maskz_permutexvar_ps(0xFFFF, x, _mm512_load_ps(lo));
  v1 = _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, x, 4), _mm512_load_ps(hi));
}

// AVX-512, a row's final 16 weights (8 bytes, canonical pairs: K % 32 == 16): each byte
// duplicated into two 32-bit lanes, the odd lane shifted right by 4, and one permute looks the
// weights up in the block's 16 scaled values.
FP4MOE_AVX512 __m512 avx512_decode16(const uint8_t* codes, const float* table) {
  const __m128i twice = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i nibble = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes));
  // (the maskz forms with every lane on: GCC 12's unmasked ones warn of an uninitialized source)
  const __m512i code =
      _mm512_maskz_srlv_epi32(0xFFFF, _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_shuffle_epi8(bytes, twice)), nibble);
  return _mm512_maskz_permutexvar_ps(0xFFFF, code, _mm512_load_ps(table));
}

// AVX2, a code widened to a 32-bit lane (bits 0-3; what is above bit 3 is ignored) looked up
// among codes 0-7 and 8-15 of a block's table (one permute each), the one of the code's bit 3 kept.
FP4MOE_AVX2 __m256 avx2_lookup(__m256i code, const float* table) {
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_load_ps(table), code),
                          _mm256_permutevar8x32_ps(_mm256_load_ps(table + 8), code),
                          _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)));
}

// AVX2, half kHalf of a group of 32 weights (16 bytes of cpu codes at `codes`): weights
// 16 kHalf .. 16 kHalf + 15, bytes 0-7 and 8-15 widened to two sets of 8 lanes, their low
// (kHalf 0) or high (kHalf 1) nibbles looked up in `table`, the block of those 16 weights.
template <int kHalf>
FP4MOE_AVX2 void avx2_decode32_half(const uint8_t* codes, const float* table, __m256 (&v)[2]) {
  for (int i = 0; i < 2; ++i) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + 8 * i)));
    v[i] = avx2_lookup(kHalf ? _mm256_srli_epi32(x, 4) : x, table);
  }
}

// AVX2, a row's final 16 weights (8 bytes, canonical pairs: K % 32 == 16) as two halves: the bytes
// widened to 32 bits, split into low and high nibbles, interleaved back to code order, each
// looked up.
FP4MOE_AVX2 void avx2_decode16(const uint8_t* codes, const float* table, __m256 (&v)[2]) {
  const __m256i fifteen = _mm256_set1_epi32(15);
  const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  const __m256i l = _mm256_and_si256(bytes, fifteen), h = _mm256_srli_epi32(bytes, 4);
  const __m256i a = _mm256_unpacklo_epi32(l, h), b = _mm256_unpackhi_epi32(l, h);
  const __m256i c[2] = {_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31)};
  for (int i = 0; i < 2; ++i) v[i] = avx2_lookup(c[i], table);
}

// Sources of row r's weights from k on: at32, the 32 of a group (k a multiple of 32, k + 32 <=
// K), as weights k..k+15 and k+16..k+31 (AVX2: at32_half<h>, the 16 of half h); at16, the final
// 16 of a row with K % 32 == 16.
struct Avx512Tile {
  const float* w;
  int64_t K;
  Avx512Tile rows(int64_t r) const { return {w + r * K, K}; }
  FP4MOE_AVX512 void at32(int r, int64_t k, __m512& v0, __m512& v1) const {
    v0 = _mm512_loadu_ps(w + r * K + k);
    v1 = _mm512_loadu_ps(w + r * K + k + 16);
  }
  FP4MOE_AVX512 __m512 at16(int r, int64_t k) const { return _mm512_loadu_ps(w + r * K + k); }
  void prefetch(int, int64_t) const {}
};
template <int kShift>
struct Avx512Codes {
  CodeRows<kShift> c;
  Avx512Codes rows(int64_t r) const { return {c.rows(r)}; }
  FP4MOE_AVX512 void at32(int r, int64_t k, __m512& v0, __m512& v1) const {
    avx512_decode32(c.codes(r, k), c.table(r, k), c.table(r, k + 16), v0, v1);
  }
  FP4MOE_AVX512 __m512 at16(int r, int64_t k) const { return avx512_decode16(c.codes(r, k), c.table(r, k)); }
  __attribute__((always_inline)) void prefetch(int r, int64_t k) const { c.prefetch(r, k); }
};
struct Avx2Tile {
  const float* w;
  int64_t K;
  Avx2Tile rows(int64_t r) const { return {w + r * K, K}; }
  template <int kHalf>
  FP4MOE_AVX2 void at32_half(int r, int64_t k, __m256 (&v)[2]) const { at16(r, k + 16 * kHalf, v); }
  FP4MOE_AVX2 void at16(int r, int64_t k, __m256 (&v)[2]) const {
    v[0] = _mm256_loadu_ps(w + r * K + k);
    v[1] = _mm256_loadu_ps(w + r * K + k + 8);
  }
  void prefetch(int, int64_t) const {}
};
template <int kShift>
struct Avx2Codes {
  CodeRows<kShift> c;
  Avx2Codes rows(int64_t r) const { return {c.rows(r)}; }
  template <int kHalf>
  FP4MOE_AVX2 void at32_half(int r, int64_t k, __m256 (&v)[2]) const {
    avx2_decode32_half<kHalf>(c.codes(r, k), c.table(r, k + 16 * kHalf), v);
  }
  FP4MOE_AVX2 void at16(int r, int64_t k, __m256 (&v)[2]) const { avx2_decode16(c.codes(r, k), c.table(r, k), v); }
  __attribute__((always_inline)) void prefetch(int r, int64_t k) const { c.prefetch(r, k); }
};

// The blocked dots: Dots::block<R, P>(w, K, a, out, ldo) sets out[p * ldo + r] = dot(row r of w,
// a[p], K) for r < R, p < P, R weight rows and P activation rows per pass over K with their
// R * P lane sets in registers. dot()'s bits: each (r, p) keeps its own kLanes lane sums, each
// summing its products in increasing k by fused multiply-adds, then the lanes are added
// 0..kLanes-1. kR x kP: the block the register file holds.

// AVX-512: one zmm per lane set; 4 x 4 of them with the 4 rows' vectors and one activation
// row's fit the 32 registers.
struct Avx512Dots {
  static constexpr int kR = 4, kP = 4;
  template <int R, int P, class Src>
  __attribute__((target("avx512f,fma"))) static void block(const Src& w, int64_t K, const float* const* a, float* out,
                                                           int64_t ldo) {
    __m512 acc[R][P];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {  // the groups of 32: two lane steps
      if ((k & 127) == 0)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) w.prefetch(r, k);
      __m512 wv[R][2];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) w.at32(r, k, wv[r][0], wv[r][1]);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const __m512 av0 = _mm512_loadu_ps(a[p] + k), av1 = _mm512_loadu_ps(a[p] + k + 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][p] = _mm512_fmadd_ps(wv[r][1], av1, _mm512_fmadd_ps(wv[r][0], av0, acc[r][p]));
      }
    }
    if (k < K) {  // K % 32 == 16: the final lane step
      __m512 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) wv[r] = w.at16(r, k);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const __m512 av = _mm512_loadu_ps(a[p] + k);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][p] = _mm512_fmadd_ps(wv[r], av, acc[r][p]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) {
        float lane[kLanes];
        _mm512_storeu_ps(lane, acc[r][p]);
        out[p * ldo + r] = sum_lanes(lane);
      }
  }
};

// AVX2: two ymm per lane set (lanes 0-7, 8-15); 2 x 2 of them with the 2 rows' vectors and one
// activation row's fit the 16 registers.
struct Avx2Dots {
  static constexpr int kR = 2, kP = 2;
  // One lane step (16 weights of each row in wv, at k) into the accumulators.
  template <int R, int P>
  FP4MOE_AVX2 static void step(const __m256 (&wv)[R][2], const float* const* a, int64_t k, __m256 (&acc)[R][P][2]) {
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const __m256 av = _mm256_loadu_ps(a[p] + k + 8 * i);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][p][i] = _mm256_fmadd_ps(wv[r][i], av, acc[r][p][i]);
      }
  }
  template <int R, int P, class Src>
  __attribute__((target("avx2,fma"))) static void block(const Src& w, int64_t K, const float* const* a, float* out,
                                                        int64_t ldo) {
    __m256 acc[R][P][2];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {  // the groups of 32: two lane steps
      if ((k & 127) == 0)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) w.prefetch(r, k);
      __m256 wv[R][2];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) w.template at32_half<0>(r, k, wv[r]);
      step<R, P>(wv, a, k, acc);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) w.template at32_half<1>(r, k, wv[r]);
      step<R, P>(wv, a, k + 16, acc);
    }
    if (k < K) {  // K % 32 == 16: the final lane step
      __m256 wv[R][2];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) w.at16(r, k, wv[r]);
      step<R, P>(wv, a, k, acc);
    }
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) {
        float lane[kLanes];
        _mm256_storeu_ps(lane, acc[r][p][0]);
        _mm256_storeu_ps(lane + 8, acc[r][p][1]);
        out[p * ldo + r] = sum_lanes(lane);
      }
  }
};

// The rows of one pass (R, then R = 1 for what is left) with P activation rows.
template <class Dots, int P, class Src>
void dots_pass(const Src& w, int64_t n, int64_t K, const float* const* a, float* out, int64_t ldo) {
  constexpr int R = Dots::kR;
  int64_t r = 0;
  for (; r + R <= n; r += R) Dots::template block<R, P>(w.rows(r), K, a, out + r, ldo);
  for (; r < n; ++r) Dots::template block<1, P>(w.rows(r), K, a, out + r, ldo);
}

// out[p * ldo + r] = dot(row r of w, a[p], K) for r < n, p < np, in Dots::kR x Dots::kP blocks;
// the activation rows left over (fewer than kP) in one more pass, so that each weight is read
// (or decoded) once per kP activation rows.
template <class Dots, class Src>
void dots_blocked(const Src& w, int64_t n, int64_t K, const float* const* a, int64_t np, float* out, int64_t ldo) {
  constexpr int P = Dots::kP;
  static_assert(P == 2 || P == 4);
  int64_t p = 0;
  for (; p + P <= np; p += P) dots_pass<Dots, P>(w, n, K, a + p, out + p * ldo, ldo);
  switch (np - p) {
    case 3: if constexpr (P > 3) dots_pass<Dots, 3>(w, n, K, a + p, out + p * ldo, ldo); break;
    case 2: if constexpr (P > 2) dots_pass<Dots, 2>(w, n, K, a + p, out + p * ldo, ldo); break;
    case 1: dots_pass<Dots, 1>(w, n, K, a + p, out + p * ldo, ldo); break;
    default: break;
  }
}

// Tiles for experts of more than fused_rows(): a row's 32 weights per step (16 in a final canonical
// step), as the sources decode them.
template <int kShift>
__attribute__((target("avx512f,fma"))) void dequantize_avx512(const uint8_t* data, const uint8_t* scale, int64_t K,
                                                              int64_t n, float* tile) {
  const Avx512Codes<kShift> c{{data, scale, K, scaled_codes(1 << kShift)}};
  for (int64_t r = 0; r < n; ++r) {
    float* o = tile + r * K;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      if ((k & 127) == 0) c.prefetch(int(r), k);
      __m512 v0, v1;
      c.at32(int(r), k, v0, v1);
      _mm512_storeu_ps(o + k, v0);
      _mm512_storeu_ps(o + k + 16, v1);
    }
    if (k < K) _mm512_storeu_ps(o + k, c.at16(int(r), k));
  }
}
FP4MOE_AVX2 void avx2_store16(float* o, const __m256 (&v)[2]) {
  _mm256_storeu_ps(o, v[0]);
  _mm256_storeu_ps(o + 8, v[1]);
}
template <int kShift>
__attribute__((target("avx2,fma"))) void dequantize_avx2(const uint8_t* data, const uint8_t* scale, int64_t K,
                                                         int64_t n, float* tile) {
  const Avx2Codes<kShift> c{{data, scale, K, scaled_codes(1 << kShift)}};
  for (int64_t r = 0; r < n; ++r) {
    float* o = tile + r * K;
    int64_t k = 0;
    __m256 v[2];
    for (; k + 32 <= K; k += 32) {
      if ((k & 127) == 0) c.prefetch(int(r), k);
      c.template at32_half<0>(int(r), k, v);
      avx2_store16(o + k, v);
      c.template at32_half<1>(int(r), k, v);
      avx2_store16(o + k + 16, v);
    }
    if (k < K) {
      c.at16(int(r), k, v);
      avx2_store16(o + k, v);
    }
  }
}
// The AMX path's tile: n FP4 rows -> n rows of Kp bf16 (each weight e2m1 * scale, exact in
// bf16; zero past K), from the same decode and tables as dequantize_avx512.
template <int kShift>
__attribute__((target("avx512f,avx512bf16,fma"))) void dequantize_bf16_avx512(const uint8_t* data, const uint8_t* scale,
                                                                             int64_t K, int64_t n, int64_t Kp,
                                                                             uint16_t* tile) {
  const Avx512Codes<kShift> c{{data, scale, K, scaled_codes(1 << kShift)}};
  for (int64_t r = 0; r < n; ++r) {
    uint16_t* o = tile + r * Kp;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      if ((k & 127) == 0) c.prefetch(int(r), k);
      __m512 v0, v1;
      c.at32(int(r), k, v0, v1);
      _mm512_storeu_si512(o + k, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
    }
    if (k < K) _mm512_storeu_si512(o + k, (__m512i)_mm512_cvtne2ps_pbh(_mm512_setzero_ps(), c.at16(int(r), k)));
  }
}
#undef FP4MOE_AVX512
#undef FP4MOE_AVX2
#endif

// n FP4 rows -> rows of Kp bf16 for the AMX path (only called where the CPU has AMX: Level::amx).
void dequantize_bf16(const uint8_t* data, const uint8_t* scale, int block, int64_t K, int64_t n, int64_t Kp,
                     uint16_t* tile) {
#if defined(__x86_64__)
  if (block == kNvfp4Block) dequantize_bf16_avx512<4>(data, scale, K, n, Kp, tile);
  else dequantize_bf16_avx512<5>(data, scale, K, n, Kp, tile);
#else
  (void)data, (void)scale, (void)block, (void)K, (void)n, (void)Kp, (void)tile;
#endif
}

// n FP4 rows (data (n, K/2) u8, scale (n, K/block)) -> tile (n, K) f32, each weight e2m1 * scale
// (no dq_scale), on the backend's SIMD level.
void dequantize(const uint8_t* data, const uint8_t* scale, int block, int64_t K, int64_t n, float* tile, Simd simd) {
#if defined(__x86_64__)
  const bool nv = block == kNvfp4Block;
  if (simd == Simd::avx512)
    return nv ? dequantize_avx512<4>(data, scale, K, n, tile) : dequantize_avx512<5>(data, scale, K, n, tile);
  if (simd == Simd::avx2)
    return nv ? dequantize_avx2<4>(data, scale, K, n, tile) : dequantize_avx2<5>(data, scale, K, n, tile);
#endif
  dequantize_scalar(data, scale, block, K, n, tile);
}

// out[p * ldo + r] = dot(w + r * K, a[p], K) for r < n, p < np on the backend's SIMD level.
void dots(Simd simd, const float* w, int64_t n, int64_t K, const float* const* a, int64_t np, float* out,
          int64_t ldo) {
#if defined(__x86_64__)
  if (simd == Simd::avx512) return dots_blocked<Avx512Dots>(Avx512Tile{w, K}, n, K, a, np, out, ldo);
  if (simd == Simd::avx2) return dots_blocked<Avx2Dots>(Avx2Tile{w, K}, n, K, a, np, out, ldo);
#endif
  for (int64_t p = 0; p < np; ++p)
    for (int64_t r = 0; r < n; ++r) out[p * ldo + r] = dot(w + r * K, a[p], K);
}

#if defined(__x86_64__)
template <int kShift>
void dots_fp4_simd(Simd simd, const uint8_t* data, const uint8_t* scale, int64_t n, int64_t K,
                   const float* const* a, int64_t np, float* out, int64_t ldo) {
  const CodeRows<kShift> c{data, scale, K, scaled_codes(1 << kShift)};
  if (simd == Simd::avx512) return dots_blocked<Avx512Dots>(Avx512Codes<kShift>{c}, n, K, a, np, out, ldo);
  dots_blocked<Avx2Dots>(Avx2Codes<kShift>{c}, n, K, a, np, out, ldo);
}
#endif

// The same dots straight from n FP4 rows (data (n, K/2), scale (n, K/block)), each weight decoded
// in registers as dequantize() would write it; the scalar loops go through the tile.
void dots_fp4(Simd simd, const uint8_t* data, const uint8_t* scale, int block, int64_t n, int64_t K,
              const float* const* a, int64_t np, float* out, int64_t ldo, float* tile) {
#if defined(__x86_64__)
  if (simd != Simd::scalar)
    return block == kNvfp4Block ? dots_fp4_simd<4>(simd, data, scale, n, K, a, np, out, ldo)
                                : dots_fp4_simd<5>(simd, data, scale, n, K, a, np, out, ldo);
#endif
  dequantize(data, scale, block, K, n, tile, simd);
  dots(simd, tile, n, K, a, np, out, ldo);
}

// The activation of SPEC §4, written as the reference writes it (same std::exp calls).
float activation(const LayerDesc& d, float g, float u) {
  if (d.activation == Activation::silu) return g / (1.0f + std::exp(-g)) * u;
  g = std::min(g, d.swiglu_limit);
  u = std::clamp(u, -d.swiglu_limit, d.swiglu_limit);
  return (u + 1.0f) * g * (1.0f / (1.0f + std::exp(-d.swiglu_alpha * g)));
}

// The SIMD level: FP4MOE_CPU_SIMD unset or 1: the best this CPU has (AVX-512 with AMX-BF16
// tiles where it has them); 0: the scalar loops; avx2 / avx512 / amx: that level, or an error
// naming the variable where the CPU lacks it (avx512 for comparisons: the same bits as the
// scalar loops and avx2; amx's large experts sum in the tiles' order).
struct Level {
  Simd simd;
  bool amx;  // large experts' dots on AMX-BF16 tiles (cpu_amx.hpp); the rest on AVX-512
};
Level simd_level() {
  bool avx2 = false, avx512 = false;
#if defined(__x86_64__)
  __builtin_cpu_init();  // asked at backend creation, not in a static initializer
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  avx512 = avx2 && __builtin_cpu_supports("avx512f");
#endif
  const bool amx = avx512 && amx_usable();
  const Level best{avx512 ? Simd::avx512 : avx2 ? Simd::avx2 : Simd::scalar, amx};
  const char* env = std::getenv("FP4MOE_CPU_SIMD");
  if (!env) return best;
  const std::string v = env;
  if (v == "1") return best;
  if (v == "0") return {Simd::scalar, false};
  if (v == "avx2" || v == "avx512" || v == "amx") {
    if (!(v == "avx2" ? avx2 : v == "avx512" ? avx512 : amx))
      fail_arg("FP4MOE_CPU_SIMD: got '" + v + "', which this CPU does not have");
    return {v == "avx2" ? Simd::avx2 : Simd::avx512, v == "amx"};
  }
  fail_arg("FP4MOE_CPU_SIMD: got '" + v + "', need 0, 1, avx2, avx512 or amx");
}

// The AMX path takes an expert from this many rows (FP4MOE_CPU_AMX_ROWS, 1-4096, for A/B runs).
// qwen3-30b W4A16 on one thread of a 2-vCPU Xeon (v72), forward time against AVX-512: from 8
// rows T = 8 / 64 / 300 x0.99 / x0.97 / x0.42; from 4 x1.00 / x1.02 / x0.43; from 1 x1.91 /
// x1.24 / x0.43 (one 16-row block of mostly padding per expert); from 17 x1.01 / x1.05 / x0.55.
constexpr int64_t kAmxRows = 8;
int64_t amx_min_rows() {
  const char* env = std::getenv("FP4MOE_CPU_AMX_ROWS");
  if (!env) return kAmxRows;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (end != env && *end == '\0' && v >= 1 && v <= 4096) return v;
  fail_arg(std::string("FP4MOE_CPU_AMX_ROWS: got '") + env + "', need an integer in [1, 4096]");
}

int thread_count() {
  if (const char* env = std::getenv("FP4MOE_CPU_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 1024) return int(v);
    fail_arg(std::string("FP4MOE_CPU_THREADS: got '") + env + "', need an integer in [1, 1024]");
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// Bump allocator over the caller's workspace; the same walk sizes it (base = nullptr).
struct Carve {
  uintptr_t at;
  template <class T>
  T* take(int64_t n) {
    at = (at + kAlign - 1) / kAlign * kAlign;
    T* p = reinterpret_cast<T*>(at);
    at += size_t(n) * sizeof(T);
    return p;
  }
};

// The per-forward buffers. R = rows in flight (T*k pairs, or E_local*M batched rows).
struct Buffers {
  int32_t* offset;  // (E_local + 1) rows of expert e are [offset[e], offset[e+1])
  int32_t* src;     // (R) row p of the sorted order -> its row of A
  int32_t* pos;     // (R) pair t*k+j (standard) -> its sorted row, or -1 (no local expert)
  int32_t* active;  // (E_local) the experts with rows, in increasing order (experts() fills it)
  float* A;         // (R, H) GEMM 1 inputs
  float* Hs;        // (R, I) GEMM 2 inputs
  float* Ys;        // (R, H) expert outputs
  float* tiles;     // (threads, 2 * kRows * max(H, I)) dequantized weight rows
  // AMX only (amx_rows > 0): each expert of at least amx_rows rows has its GEMM input rows as
  // VNNI blocks of 16 (cpu_amx.hpp), the first at xblock[e] (-1: the expert takes the vector
  // path); at most R / amx_rows such experts, each padded by at most 15 rows
  int32_t* xblock;  // (E_local)
  uint16_t* xv;     // (R + 15 min(E_local, R / amx_rows), max(H, I) padded to 32)

  static Buffers carve(uintptr_t base, int64_t E_local, int64_t R, int64_t H, int64_t I, int threads,
                       int64_t amx_rows) {
    Carve c{base};
    Buffers b;
    b.offset = c.take<int32_t>(E_local + 1);
    b.src = c.take<int32_t>(R);
    b.pos = c.take<int32_t>(R);
    b.active = c.take<int32_t>(E_local);
    b.A = c.take<float>(R * H);
    b.Hs = c.take<float>(R * I);
    b.Ys = c.take<float>(R * H);
    b.tiles = c.take<float>(int64_t(threads) * tile_floats(H, I));
    b.xblock = amx_rows > 0 ? c.take<int32_t>(E_local) : nullptr;
    b.xv = amx_rows > 0 ? c.take<uint16_t>((R + 15 * std::min(E_local, R / amx_rows)) * amx_k_padded(std::max(H, I)))
                        : nullptr;
    b.end = c.at;
    return b;
  }
  static int64_t tile_floats(int64_t H, int64_t I) { return 2 * kRows * amx_k_padded(std::max(H, I)); }
  uintptr_t end = 0;
};

class CpuBackend final : public Backend {
 public:
  // amx_rows: the AMX path's threshold (amx_min_rows()), 0 without the AMX path
  CpuBackend(std::shared_ptr<const HostWeights> w, int threads, Simd simd, int64_t amx_rows)
      : w_(std::move(w)), threads_(threads), simd_(simd), amx_rows_(amx_rows), pool_(threads) {
    desc = w_->desc;
    num_local = w_->num_local;
    name = "cpu";
    device = DeviceType::cpu;
  }

  size_t workspace_size(int64_t T) const override { return bytes(T * desc.top_k); }
  size_t batched_workspace_size(int64_t M) const override { return bytes(num_local * M); }

  void forward(const ForwardArgs& args) const override {
    const TensorView &X = args.hidden_states, &W = args.topk_weights, &ID = args.topk_ids, &O = args.out;
    const int64_t T = X.shape[0], H = w_->H(), k = ID.shape[1], EL = num_local;
    Buffers b = Buffers::carve(aligned(args.workspace), EL, T * k, H, w_->I(), threads_, amx_rows_);
    auto id_at = [&](int64_t t, int64_t j) {
      const int32_t id = static_cast<const int32_t*>(ID.data)[t * ID.stride[0] + j * ID.stride[1]];
      if (id < 0) return -1;
      return w_->expert_map.empty() ? id : w_->expert_map[id];
    };
    auto weight_at = [&](int64_t t, int64_t j) { return static_cast<const float*>(W.data)[t * W.stride[0] + j * W.stride[1]]; };

    // Counting sort of the pairs by local expert; within an expert, pairs in (t, j) order.
    std::fill(b.offset, b.offset + EL + 1, 0);
    for (int64_t q = 0; q < T * k; ++q)
      if (const int32_t e = id_at(q / k, q % k); e >= 0) ++b.offset[e + 1];
    for (int64_t e = 0; e < EL; ++e) b.offset[e + 1] += b.offset[e];
    for (int64_t e = EL; e > 0; --e) b.offset[e] = b.offset[e - 1];  // offset[e+1] = start of e, as a cursor
    b.offset[0] = 0;
    for (int64_t q = 0; q < T * k; ++q) {
      const int32_t e = id_at(q / k, q % k);
      b.pos[q] = e < 0 ? -1 : b.offset[e + 1]++;
      if (e >= 0) b.src[b.pos[q]] = int32_t(q / k);
    }
    // now offset[e+1] = end of e = start of e+1

    // A (T, H): x_t as bf16; under router weight on input (k == 1) times w_t, rounded again.
    pool_.run(T, [&](int64_t t, int) {
      float* a = b.A + t * H;
      for (int64_t i = 0; i < H; ++i) a[i] = round_bf16(read_activation(X.data, X.dtype, t * X.stride[0] + i * X.stride[1]));
      if (args.apply_router_weight_on_input) {
        const float wt = weight_at(t, 0);
        for (int64_t i = 0; i < H; ++i) a[i] = round_bf16(a[i] * wt);
      }
      quant_in(a);
    });

    experts(b);

    // out_t = sum_j w_j y_j in slot order, one rounding.
    pool_.run(T, [&](int64_t t, int tid) {
      float* acc = b.tiles + tid * Buffers::tile_floats(H, w_->I());  // (H) fits: tile >= 2 * kRows * H
      std::fill(acc, acc + H, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t p = b.pos[t * k + j];
        if (p < 0) continue;  // no expert, or not on this rank: contributes exactly 0
        const float wj = args.apply_router_weight_on_input ? 1.0f : weight_at(t, j);
        const float* y = b.Ys + int64_t(p) * H;
        for (int64_t i = 0; i < H; ++i) acc[i] += wj * y[i];
      }
      for (int64_t i = 0; i < H; ++i) {
        const int64_t at = t * O.stride[0] + i * O.stride[1];
        write_activation(O.data, O.dtype, at, args.accumulate ? read_activation(O.data, O.dtype, at) + acc[i] : acc[i]);
      }
    });
  }

  void forward_batched(const BatchedArgs& args) const override {
    const TensorView &X = args.hidden_states, &N = args.expert_num_tokens, &O = args.out;
    const int64_t EL = num_local, M = X.shape[1], H = w_->H();
    Buffers b = Buffers::carve(aligned(args.workspace), EL, EL * M, H, w_->I(), threads_, amx_rows_);
    auto count = [&](int64_t e) { return int64_t(static_cast<const int32_t*>(N.data)[e * N.stride[0]]); };
    b.offset[0] = 0;
    for (int64_t e = 0; e < EL; ++e) b.offset[e + 1] = int32_t(b.offset[e] + count(e));
    const int64_t R = b.offset[EL];
    for (int64_t p = 0; p < R; ++p) b.src[p] = int32_t(p);

    // A row p = expert e's row r, p = offset[e] + r.
    pool_.run(EL, [&](int64_t e, int) {
      for (int64_t r = 0; r < count(e); ++r) {
        float* a = b.A + (b.offset[e] + r) * H;
        if (X.dtype == DType::u8) {
          // already NVFP4 (W4A4 dispatch quantized it): decode, no second round trip.
          // data row (H/2) u8, scale row (H/16) e4m3, both contiguous along H.
          const TensorView& S = args.hidden_scale;
          nvfp4_dequantize_rows(static_cast<const uint8_t*>(X.data) + e * X.stride[0] + r * X.stride[1],
                                static_cast<const uint8_t*>(S.data) + e * S.stride[0] + r * S.stride[1], 1, H,
                                1.0f, a);  // a13_dq: in mult13
        } else {
          for (int64_t i = 0; i < H; ++i)
            a[i] = round_bf16(read_activation(X.data, X.dtype, e * X.stride[0] + r * X.stride[1] + i * X.stride[2]));
          quant_in(a);
        }
      }
    });

    experts(b);

    pool_.run(R, [&](int64_t p, int) {
      const int64_t e = std::upper_bound(b.offset, b.offset + EL + 1, int32_t(p)) - b.offset - 1;
      const int64_t r = p - b.offset[e];
      const float* y = b.Ys + p * H;
      for (int64_t i = 0; i < H; ++i) write_activation(O.data, O.dtype, e * O.stride[0] + r * O.stride[1] + i * O.stride[2], y[i]);
    });
  }

 private:
  size_t bytes(int64_t R) const {
    return Buffers::carve(0, num_local, R, w_->H(), w_->I(), threads_, amx_rows_).end + kAlign;  // + kAlign: any start byte
  }
  static uintptr_t aligned(const TensorView& ws) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ws.data);
    return (p + kAlign - 1) / kAlign * kAlign;
  }

  // a (H) bf16-valued -> the GEMM 1 input, in place: under W4A4 the NVFP4 round trip without
  // its dq_scale (e2m1 * scale, exact), which multiplies the dots instead (mult13).
  void quant_in(float* a) const {
    if (w_->desc.act_quant == ActQuant::nvfp4) nvfp4_fake_quant(a, w_->H(), 1.0f / w_->a13_dq, 1.0f, a);
  }
  // What GEMM 1's / GEMM 2's dots of expert e are multiplied by: the weights' dq_scale, under
  // W4A4 times the activations'. (The dots take exact products of the codes times their block
  // scales, as the CUDA kernels do; SPEC §4 fixes no order of these fp32 products and sums.)
  float mult13(int64_t e) const { return w_->w13_dq[e] * (w4a4() ? w_->a13_dq : 1.0f); }
  float mult2(int64_t e) const { return w_->w2_dq[e] * (w4a4() ? w_->a2_dq : 1.0f); }
  bool w4a4() const { return w_->desc.act_quant == ActQuant::nvfp4; }
  int64_t fused_rows() const { return simd_ == Simd::avx512 ? kFusedAvx512 : kFusedAvx2; }

  // The AMX path's inputs: for each expert of at least amx_rows_ rows, its GEMM inputs (row(p):
  // the K values of row p of the sorted order) as VNNI blocks of 16 into b.xv, the first at
  // b.xblock[e]; -1 for the other experts, and for one with an input the tiles would flush
  // (subnormal, or below 2^-100: amx_vnni_block): it takes the vector path, in GEMM 2 too when it
  // was GEMM 1's input (gemm2: only the experts GEMM 1 ran on the tiles).
  template <class Row>
  void amx_inputs(const Buffers& b, int64_t n_active, int64_t K, bool gemm2, const Row& row) const {
    const int64_t Kp = amx_k_padded(K);
    int32_t next = 0;
    for (int64_t i = 0; i < n_active; ++i) {
      const int64_t e = b.active[i], rows = b.offset[e + 1] - b.offset[e];
      const bool tiles = rows >= amx_rows_ && (!gemm2 || b.xblock[e] >= 0);
      b.xblock[e] = tiles ? next : -1;
      if (tiles) next += int32_t((rows + 15) / 16);
    }
    if (next == 0) return;  // no expert on the tiles (small T): no parallel step
    pool_.run(n_active, [&](int64_t i, int) {
      const int64_t e = b.active[i];
      if (b.xblock[e] < 0) return;
      const float* rows[16];
      for (int64_t p0 = b.offset[e], blk = b.xblock[e]; p0 < b.offset[e + 1]; p0 += 16, ++blk) {
        const int n = int(std::min<int64_t>(16, b.offset[e + 1] - p0));
        for (int c = 0; c < n; ++c) rows[c] = row(p0 + c);
        if (!amx_vnni_block(rows, n, K, b.xv + blk * Kp * 16)) {
          b.xblock[e] = -1;
          return;
        }
      }
    });
  }

  // The AMX path's dots of expert e: its weight tile wt (RB blocks of 16 rows of Kp bf16) with
  // each of its rows' VNNI blocks (b.xv from b.xblock[e]), three token blocks a call; out(p, d)
  // for each sorted row p of the expert, with d[r * 16] its sum with tile row r.
  template <class Out>
  void amx_expert(const Buffers& b, int64_t e, const uint16_t* wt, int RB, int64_t Kp, const Out& out) const {
    alignas(64) float sums[3 * 32 * 16];
    const int64_t nb = (b.offset[e + 1] - b.offset[e] + 15) / 16;
    for (int64_t t0 = 0; t0 < nb; t0 += 3) {
      const int nt = int(std::min<int64_t>(3, nb - t0));
      amx_dots(wt, RB, Kp, b.xv + (b.xblock[e] + t0) * Kp * 16, nt, sums);
      for (int t = 0; t < nt; ++t)
        for (int64_t c = 0; c < 16; ++c) {
          const int64_t p = b.offset[e] + (t0 + t) * 16 + c;
          if (p >= b.offset[e + 1]) break;
          out(p, sums + t * RB * 256 + c);
        }
    }
  }

  // Rows of A grouped by expert (offset, src) -> Ys: GEMM 1, activation, GEMM 2.
  void experts(const Buffers& b) const {
    const HostWeights& w = *w_;
    const int64_t H = w.H(), I = w.I(), EL = num_local, tile = Buffers::tile_floats(H, I);
    const int64_t R = b.offset[EL];
    // Work items only for the experts with rows (at small T most have none, and an item that
    // returns at once still costs the threads' shared counter a round trip).
    int64_t n_active = 0;
    for (int64_t e = 0; e < EL; ++e)
      if (b.offset[e + 1] > b.offset[e]) b.active[n_active++] = int32_t(e);

    // GEMM 1: item = (expert e, rows [i0, i0 + kRows) of gate and of up), dotted with the
    // expert's rows of A in chunks of kChunk (dots of chunk row c, gate row r at d[c * 2n + r],
    // up row r at d[c * 2n + n + r]). An expert of at most fused_rows() rows (one chunk) decodes the
    // weights in registers (dots_fp4; the scalar loops through the tile, one matrix at a time); a
    // larger one dequantizes the n gate rows, then the n up rows, once into the thread's tile
    // (2n rows of H) for all its chunks.
    const int64_t blocks1 = (I + kRows - 1) / kRows;
    if (amx_rows_ > 0) amx_inputs(b, n_active, H, false, [&](int64_t p) { return b.A + int64_t(b.src[p]) * H; });
    pool_.run(n_active * blocks1, [&](int64_t item, int tid) {
      const int64_t e = b.active[item / blocks1], i0 = item % blocks1 * kRows, i1 = std::min(I, i0 + kRows), n = i1 - i0;
      const int64_t rows = b.offset[e + 1] - b.offset[e];
      const int64_t C = H / w.block;
      const uint8_t* q = w.w13.data() + e * 2 * I * (H / 2);
      const uint8_t* s = w.w13_scale.data() + e * 2 * I * C;
      const float mult = mult13(e);
      const float* b13 = w.w13_bias.empty() ? nullptr : w.w13_bias.data() + e * 2 * I;  // (2I) gate | up
      auto h_out = [&](int64_t p, int64_t r, float g, float u) {  // sorted row p, intermediate row i0 + r
        g *= mult;
        u *= mult;
        if (b13) {
          g += b13[i0 + r];
          u += b13[I + i0 + r];
        }
        b.Hs[p * I + i0 + r] = round_bf16(activation(w.desc, g, u));
      };
      if (amx_rows_ > 0 && b.xblock[e] >= 0) {
        // gate rows at tile rows 0..n-1, up rows at 16..16+n-1, the rest zero; sums (3, 32, 16)
        const int64_t Kp = amx_k_padded(H);
        uint16_t* wt = reinterpret_cast<uint16_t*>(b.tiles + tid * tile);
        if (n < 16) std::fill(wt, wt + 32 * Kp, uint16_t(0));
        dequantize_bf16(q + i0 * (H / 2), s + i0 * C, w.block, H, n, Kp, wt);
        dequantize_bf16(q + (I + i0) * (H / 2), s + (I + i0) * C, w.block, H, n, Kp, wt + 16 * Kp);
        amx_expert(b, e, wt, 2, Kp, [&](int64_t p, const float* d) {
          for (int64_t r = 0; r < n; ++r) h_out(p, r, d[r * 16], d[(16 + r) * 16]);
        });
        return;
      }
      float* gate = b.tiles + tid * tile;  // (n, H)
      float* up = gate + n * H;            // (n, H)
      const bool fused = rows <= fused_rows();
      if (!fused) {
        dequantize(q + i0 * (H / 2), s + i0 * C, w.block, H, n, gate, simd_);
        dequantize(q + (I + i0) * (H / 2), s + (I + i0) * C, w.block, H, n, up, simd_);
      }
      const float* a[kChunk];
      float d[kChunk * 2 * kRows];
      for (int64_t p0 = b.offset[e]; p0 < b.offset[e + 1]; p0 += kChunk) {
        const int64_t np = std::min<int64_t>(kChunk, b.offset[e + 1] - p0);
        for (int64_t c = 0; c < np; ++c) a[c] = b.A + int64_t(b.src[p0 + c]) * H;
        if (fused) {
          dots_fp4(simd_, q + i0 * (H / 2), s + i0 * C, w.block, n, H, a, np, d, 2 * n, gate);
          dots_fp4(simd_, q + (I + i0) * (H / 2), s + (I + i0) * C, w.block, n, H, a, np, d + n, 2 * n, gate);
        } else {
          dots(simd_, gate, 2 * n, H, a, np, d, 2 * n);
        }
        for (int64_t c = 0; c < np; ++c)
          for (int64_t r = 0; r < n; ++r) h_out(p0 + c, r, d[c * 2 * n + r], d[c * 2 * n + n + r]);
      }
    });
    if (w4a4())  // h' = e2m1 * scale, its dq_scale in mult2
      pool_.run(R, [&](int64_t p, int) { nvfp4_fake_quant(b.Hs + p * I, I, 1.0f / w.a2_dq, 1.0f, b.Hs + p * I); });

    // GEMM 2: item = (expert e, output rows [o0, o0 + kRows)), the expert's rows of Hs in
    // chunks of kChunk as in GEMM 1.
    const int64_t blocks2 = (H + kRows - 1) / kRows;
    if (amx_rows_ > 0) amx_inputs(b, n_active, I, true, [&](int64_t p) { return b.Hs + p * I; });
    pool_.run(n_active * blocks2, [&](int64_t item, int tid) {
      const int64_t e = b.active[item / blocks2], o0 = item % blocks2 * kRows, o1 = std::min(H, o0 + kRows), n = o1 - o0;
      const int64_t rows = b.offset[e + 1] - b.offset[e];
      const int64_t C = I / w.block;
      const uint8_t* q = w.w2.data() + e * H * (I / 2) + o0 * (I / 2);
      const uint8_t* s = w.w2_scale.data() + e * H * C + o0 * C;
      const float mult = mult2(e);
      const float* b2 = w.w2_bias.empty() ? nullptr : w.w2_bias.data() + e * H;  // (H)
      if (amx_rows_ > 0 && b.xblock[e] >= 0) {
        const int64_t Kp = amx_k_padded(I);
        uint16_t* wt = reinterpret_cast<uint16_t*>(b.tiles + tid * tile);  // (16, Kp): n rows, the rest zero
        if (n < 16) std::fill(wt, wt + 16 * Kp, uint16_t(0));
        dequantize_bf16(q, s, w.block, I, n, Kp, wt);
        amx_expert(b, e, wt, 1, Kp, [&](int64_t p, const float* d) {
          float* y = b.Ys + p * H;
          for (int64_t r = 0; r < n; ++r) y[o0 + r] = d[r * 16] * mult + (b2 ? b2[o0 + r] : 0.0f);
        });
        return;
      }
      float* down = b.tiles + tid * tile;  // (n, I)
      const bool fused = rows <= fused_rows();
      if (!fused) dequantize(q, s, w.block, I, n, down, simd_);
      const float* a[kChunk];
      float d[kChunk * kRows];
      for (int64_t p0 = b.offset[e]; p0 < b.offset[e + 1]; p0 += kChunk) {
        const int64_t np = std::min<int64_t>(kChunk, b.offset[e + 1] - p0);
        for (int64_t c = 0; c < np; ++c) a[c] = b.Hs + (p0 + c) * I;
        if (fused) dots_fp4(simd_, q, s, w.block, n, I, a, np, d, n, down);
        else dots(simd_, down, n, I, a, np, d, n);
        for (int64_t c = 0; c < np; ++c) {
          float* y = b.Ys + (p0 + c) * H;
          for (int64_t r = 0; r < n; ++r) y[o0 + r] = d[c * n + r] * mult + (b2 ? b2[o0 + r] : 0.0f);
        }
      }
    });
  }

  std::shared_ptr<const HostWeights> w_;
  int threads_;
  Simd simd_;
  int64_t amx_rows_;  // experts of at least this many rows on the AMX tiles; 0: no AMX path
  mutable WorkerPool pool_;  // forward is const; the pool is its threads, not its state
};

// The weights in cpu codes: Layer::prepare has converted them in place (the entry's adopt); weights
// still canonical (shared with another backend) are copied and converted.
std::unique_ptr<Backend> create_cpu(std::shared_ptr<const HostWeights> w, const PrepareOptions&) {
  const int threads = thread_count();
  const Level level = simd_level();
  const int64_t amx_rows = amx_min_rows();  // checked on every level: a bad value is named anyway
  return std::make_unique<CpuBackend>(with_cpu_codes(std::move(w)), threads, level.simd, level.amx ? amx_rows : 0);
}

}  // namespace

std::string cpu_simd_level() {
  const Level s = simd_level();
  return s.amx ? "amx" : s.simd == Simd::avx512 ? "avx512" : s.simd == Simd::avx2 ? "avx2" : "scalar";
}

BackendEntry cpu_backend_entry() {
  return BackendEntry{
      "cpu",
      DeviceType::cpu,
      [] { return std::string(); },
      [](const LayerDesc&) { return std::string(); },
      "the multithreaded CPU backend: always available, fastest without a GPU",
      create_cpu,
      to_cpu_codes,
  };
}

}  // namespace fp4moe::detail
