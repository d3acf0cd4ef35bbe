#include "cpu/cpu_amx.hpp"

#include <bit>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define FP4MOE_HAVE_AMX 1
#endif

namespace fp4moe::detail {

#if defined(FP4MOE_HAVE_AMX)
namespace {

// Tiles 0-5: fp32 sums (16 rows x 16 tokens), by (row block, token block) = tile 3 * rb + t;
// tile 6: 16 weight rows x 32 k (bf16); tile 7: 16 k pairs x 16 tokens (bf16 pairs). A
// constant object: GCC 13 drops the stores to a local config before LDTILECFG reads it.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
const TileConfig kTileConfig{};

#define FP4MOE_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))

// One step of 32 k for RB row blocks and NT token blocks (template: tile numbers are immediates).
template <int RB, int NT>
FP4MOE_AMX void dots_tiles(const uint16_t* w, int64_t Kp, const uint16_t* x, float* c) {
  // (the tile intrinsics paste their tile numbers into the instruction: literals, each (rb, t)
  // spelled out with its tile 3 * rb + t)
#define FP4MOE_ZERO(rb, t, tile) \
  if constexpr (rb < RB && t < NT) _tile_zero(tile);
  FP4MOE_ZERO(0, 0, 0) FP4MOE_ZERO(0, 1, 1) FP4MOE_ZERO(0, 2, 2) FP4MOE_ZERO(1, 0, 3) FP4MOE_ZERO(1, 1, 4)
  FP4MOE_ZERO(1, 2, 5)
#undef FP4MOE_ZERO
  const int64_t wstride = Kp * 2, xblock = Kp * 16;
  for (int64_t k = 0; k < Kp; k += 32) {
#define FP4MOE_DOT(rb, t, tile)                  \
  if constexpr (rb < RB && t < NT) {             \
    _tile_loadd(7, x + t * xblock + k * 16, 64); \
    _tile_dpbf16ps(tile, 6, 7);                  \
  }
    _tile_loadd(6, w + k, wstride);
    FP4MOE_DOT(0, 0, 0) FP4MOE_DOT(0, 1, 1) FP4MOE_DOT(0, 2, 2)
    if constexpr (RB > 1) {
      _tile_loadd(6, w + 16 * Kp + k, wstride);
      FP4MOE_DOT(1, 0, 3) FP4MOE_DOT(1, 1, 4) FP4MOE_DOT(1, 2, 5)
    }
#undef FP4MOE_DOT
  }
  // c: (NT, RB * 16, 16)
#define FP4MOE_STORE(rb, t, tile) \
  if constexpr (rb < RB && t < NT) _tile_stored(tile, c + (t * RB * 16 + rb * 16) * 16, 64);
  FP4MOE_STORE(0, 0, 0) FP4MOE_STORE(0, 1, 1) FP4MOE_STORE(0, 2, 2) FP4MOE_STORE(1, 0, 3) FP4MOE_STORE(1, 1, 4)
  FP4MOE_STORE(1, 2, 5)
#undef FP4MOE_STORE
}

template <int RB>
FP4MOE_AMX void dots_rb(const uint16_t* w, int64_t Kp, const uint16_t* blocks, int nt, float* c) {
  const int64_t xblock = Kp * 16;
  int t = 0;
  for (; t + 3 <= nt; t += 3) dots_tiles<RB, 3>(w, Kp, blocks + t * xblock, c + t * RB * 256);
  if (nt - t == 2) dots_tiles<RB, 2>(w, Kp, blocks + t * xblock, c + t * RB * 256);
  if (nt - t == 1) dots_tiles<RB, 1>(w, Kp, blocks + t * xblock, c + t * RB * 256);
}

FP4MOE_AMX void load_config() { _tile_loadconfig(&kTileConfig); }
FP4MOE_AMX void release() { _tile_release(); }

}  // namespace

bool amx_usable() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, bf16 = (d >> 22) & 1, avx512bw = (b >> 30) & 1, avx512f = (b >> 16) & 1;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    const bool avx512bf16 = (a >> 5) & 1;
    if (!(tile && bf16 && avx512f && avx512bw && avx512bf16)) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return ok;
}

// A row's 32 values at a time: the magnitude check on the bits (a value below kAmxSmallest but not
// zero has its magnitude bits, less one, below kAmxSmallest's), the pairs converted by one
// VCVTNE2PS2BF16 (exact: the values are bf16 values) into 16 dwords, pair i of the step, scattered
// to their rows of the block (16 dwords apart); past K, zeros (masked loads, no scatter).
static FP4MOE_AMX bool vnni_row(const float* r, int64_t K, uint32_t* block, int c) {
  const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i below = _mm512_set1_epi32(int32_t(std::bit_cast<uint32_t>(kAmxSmallest) - 1));
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i rows = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  auto lanes = [](int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1); };
  for (int64_t k = 0; k < K; k += 32) {
    const __m512 v0 = _mm512_maskz_loadu_ps(lanes(K - k), r + k), v1 = _mm512_maskz_loadu_ps(lanes(K - k - 16), r + k + 16);
    const __m512i a0 = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v0), mag), one);
    const __m512i a1 = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v1), mag), one);
    if (_mm512_cmplt_epu32_mask(a0, below) | _mm512_cmplt_epu32_mask(a1, below)) return false;
    const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
    const __mmask16 live = lanes((K - k + 1) / 2);  // the pairs holding a value
    _mm512_mask_i32scatter_epi32(block + (k / 2) * 16 + c, live, rows, pairs, 4);
  }
  return true;
}

bool amx_vnni_block(const float* const* rows, int n, int64_t K, uint16_t* block) {
  const int64_t Kp = amx_k_padded(K);
  std::memset(block, 0, size_t(Kp) * 16 * 2);
  for (int c = 0; c < n; ++c)
    if (!vnni_row(rows[c], K, reinterpret_cast<uint32_t*>(block), c)) return false;
  return true;
}

void amx_dots(const uint16_t* w, int RB, int64_t Kp, const uint16_t* blocks, int nt, float* c) {
  load_config();  // per call: other code on this thread (a library's own tiles) may have changed it
  if (RB == 2) dots_rb<2>(w, Kp, blocks, nt, c);
  else dots_rb<1>(w, Kp, blocks, nt, c);
  release();
}

#else

bool amx_usable() { return false; }
bool amx_vnni_block(const float* const*, int, int64_t, uint16_t*) { return false; }
void amx_dots(const uint16_t*, int, int64_t, const uint16_t*, int, float*) {}

#endif

}  // namespace fp4moe::detail
