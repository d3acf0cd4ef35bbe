// Internals of the CUDA grouped GEMMs shared by weights_cuda.cu (which builds the
// layout), gemm_naive.cu, gemm_sm80_kernel.cuh, gemm_decode.cu, gemm_sm90.cu and the split-K
// and stream kernels (which read it) and gemm_dispatch.cpp.
// Host-includable: the index functions are FP4MOE_HD (host and device).
//
// ---------------------------------------------------------------------------
// The fragment layout of one weight matrix set (w13 or w2), E experts of N x K
// ---------------------------------------------------------------------------
// Rows are in *device order* n'. w2: n' = n. w13: gate and up rows are interleaved in
// groups of 8 so that one MMA tile of 16 rows holds gate_i and up_i of the same 8 i:
//   n' = (i / 8) * 16 + (up ? 8 : 0) + i % 8                       (w13_device_row)
// so the GEMM-1 epilogue finds gate (accumulator rows g) and up (rows g + 8) of one i in
// the same thread, and 16 consecutive i (one NVFP4 block of h) in one warp's 32 rows.
//
// K is padded to Kp = ceil(K / 64) * 64 with zero codes. The matrix is cut into
// fragment blocks of 16 rows x 64 k (512 bytes). Fragment rows (n' / 16) go in groups of
// kFragGroup = 8 (128 rows: the tile of a fast-path or rsws CTA), and a group's blocks are
// ordered k-block by k-block, the group's 8 fragment rows of one k-block side by side:
//   q: uint32 words [E][NG][Kp/64][nb % 8][lane 32][kk 4]            (frag_block, frag_nibble)
// with NG = ceil(N / 128) groups per expert; the rows of a last group past N hold zero codes
// (and zero scales). So a CTA's 128 rows of one k-block are 4 KiB in a row and its whole K
// one contiguous stream, and a decode warp's two fragment rows (an even pair) 1 KiB in a row.
// Measured under the 700 W cap after 2 s of replays (v74): on the H200, the fast path's CTAs
// reading their weights as one stream instead of 8 streams KB * 512 bytes apart (a timing
// probe) -0.5 to -3.8% at T = 8-128; on an H100, this layout against the one before, -0.4 to
// -2.4% at 11 of 12 points from T = 1 to 8192 (+1.0% at qwen3-235b T = 2048).
// Word (lane, kk) holds the 8 e2m1 values lane needs for the A operand of
// mma.m16n8k16 over k-step kk (PTX ISA, "Matrix Fragments for mma.m16n8k16", .bf16 A):
// with g = lane / 4, t = lane % 4, register a_j (j = 0..3) holds rows
// (g, g+8, g, g+8)[j] and MMA position k = 2t + (j >= 2 ? 8 : 0) + {0, 1} of the k-step.
// k is permuted inside each k-block (kperm_position): MMA position 16kk + 8h + 2t + e holds
// logical k 16t + 4kk + 2h + e, so a lane's four words are logical k 16t .. 16t + 15 of its
// rows, one NVFP4 block (half an MXFP4 one), and the kernels build the rows' scale pair once
// per fragment block instead of once per word (2 of a word's 15 decode instructions). The
// activations an MMA meets must be in the same order: the mma.sync kernels read logical rows
// so (lane t's 16 values of a k-block are 32 contiguous bytes: b0, b1 of k-steps 0..3), the
// wgmma kernels, which read B in MMA order from shared memory, get k-permuted copies (x staged,
// h written so by every GEMM 1 epilogue: kperm_index). Logically, element (a_j, low)
// is nibble 2j (bits 8j..8j+3) of the word, (a_j, high) nibble 2j + 1 (frag_nibble), each as a
// *stored code*: the e2m1 code with its two low bits swapped (frag_stored_code; bit 3 sign,
// bit 2 exponent high, bit 1 mantissa, bit 0 exponent low). In memory the word's bits are
// permuted (frag_word_store / frag_word_load) so that each code's two 2-bit halves sit where
// they are byte-permute selectors: the low byte of a value's bf16 depends on stored bits 1-0,
// the high byte on bits 3-2, and frag_decode_word turns the word into a_0..a_3 with four
// table lookups and five integer operations. One lane's 4 words
// (16 bytes) cover k-steps 0..3, so a warp loads a whole fragment block with one
// coalesced 16-byte load per lane.
//
// Scales: SB = 16 * 64 / block bytes per fragment block, same block order, inside
//   [g 8][c 64/block][half 2]        c = (k % 64) / block (logical k), half = (n' % 16) / 8
// so lane reads its 2 * 64/block bytes (rows g and g+8 of every scale column) at once and
// picks column t (MX: t / 2) for all four k-steps (frag_scale_select).
// NVFP4: the block scale's magnitude as an unsigned e5m3 code' (nvfp4_prepared_code):
// |s| = 2^(code' / 8 - 9) * (1 + (code' % 8) / 8), which holds every finite e4m3 magnitude,
// subnormals included, as a normal number. The scale's sign is folded into the block's 16
// e2m1 sign bits, and a zero scale zeroes the block's codes (code' 0 then), so the
// kernels' bf16 S is one integer step away: bits = code' * 16 + (236 << 7).
// MXFP4: the biased bf16 exponent of the folded scale S = 2^(c_e8m0 - cmax[e] + 126),
// i.e. code' = c_e8m0 - cmax[e] + 253 (see below): bits = code' << 7.
//
// Scale folding (exactness, SPEC §4). Kernels multiply e2m1 * 2^-126 (the raw nibble
// placed in a bf16's exponent/mantissa bits) by a bf16 S and get w * 2^-F exactly, with
// F = 8 for NVFP4 (S = e4m3 * 2^118 < 2^127) and F = cmax[e] - 127 for MXFP4 (cmax the
// largest e8m0 code of a non-zero block of expert e: S = 2^(c - cmax + 126) <= 2^126).
// The fp32 sum is multiplied by epi[e] = 2^F * w_dq[e] (exact power-of-two fold).
// MXFP4 needs cmax - c <= 125 over non-zero blocks so that every product stays a normal
// bf16; upload_weights rejects an expert that spans more (no real checkpoint does).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/gemm.hpp"
#include "fp4moe/format.h"
#if defined(__CUDACC__)
#include "cuda/common/ptx.cuh"
#endif

namespace fp4moe::cuda {

inline constexpr int kFragRows = 16;    // rows per fragment block (the MMA's M)
inline constexpr int kFragK = 64;       // k per fragment block (4 MMA k-steps)
inline constexpr int kFragWords = 128;  // 16 x 64 e2m1 = 512 bytes = 128 uint32
inline constexpr int kFragGroup = 8;    // fragment rows per group (frag_block)
inline constexpr int kNvfp4Fold = 8;    // F for NVFP4 weights (and W4A4 activations)
inline constexpr int kMxMaxSpan = 125;  // largest cmax - c an MXFP4 expert may span

// One weight matrix set on the device, as the kernels see it.
struct WeightMatrix {
  const uint32_t* q = nullptr;     // [E][NG][Kp/64][8][32][4] fragment words (frag_block)
  const uint8_t* scale = nullptr;  // [E][NG][Kp/64][8][SB] folded scale codes
  const float* epi = nullptr;      // [E] 2^F[e] * w_dq[e]
  const float* bias = nullptr;     // [E, N] canonical row order (concat for w13), or nullptr
  int64_t num_experts = 0;
  int N = 0, K = 0, Kp = 0;        // device rows, logical K, padded K
  int groups = 0;                  // frag_groups(N): read from the parameters (a kernel's
                                   // own frag_groups(N) held a register, v74)
  int block = 16;                  // 16: e4m3 scale codes; 32: MX exponent codes
  uint32_t zero = 0;                // 0, unknown to the compiler (sm80::decode_table)
};

FP4MOE_HD constexpr int frag_scale_bytes(int block) { return kFragRows * kFragK / block; }

// The k order inside every 64-wide k-block (kperm, see the layout above): logical k
// 16t + 4j + 2h + e (t, j < 4; h, e < 2) sits at position 16j + 8h + 2t + e, where the MMA's
// fragment puts it in lane t's register a_{2h} / a_{2h+1} of k-step j. So the four k-steps of a
// lane's words hold logical k 16t .. 16t + 15: one NVFP4 block (MXFP4: half a block).
FP4MOE_HD constexpr int kperm_position(int l) {
  return 16 * ((l / 4) % 4) + 8 * ((l / 2) % 2) + 2 * (l / 16) + l % 2;
}
FP4MOE_HD constexpr int kperm_logical(int p) {
  return 16 * ((p / 2) % 4) + 4 * (p / 16) + 2 * ((p / 8) % 2) + p % 2;
}
// Index k of a row in the k-permuted order (the 64-wide k-block stays; its k moves inside it).
// A k-permuted activation row (h, the wgmma kernels' staged x) holds kperm_row(K) entries, those
// of logical k >= K zero: a partial last k-block spreads its k over all 64 positions.
FP4MOE_HD constexpr int64_t kperm_index(int64_t k) { return (k & ~int64_t(63)) | kperm_position(int(k & 63)); }
// (kperm_row, KOrder: gemm.hpp)
// A 16-block's eight pairs (an 8-run's four) from one base: for k0 a multiple of 16, logical
// k0 + 2m (m < 8) sits at kperm_index(k0) + 8m, as kperm_position(16t + 2m) = 2t + 8m (for k0
// a multiple of 8 and m < 4 alike). The staging kernels address a block so, with constant
// offsets, where each pair's kperm_index took 64-bit arithmetic of its own. kperm_block_at(c):
// kperm_index(16c), logical block c's base.
FP4MOE_HD constexpr int64_t kperm_block_at(int64_t c) { return 64 * (c >> 2) + 2 * (c & 3); }
FP4MOE_HD constexpr bool kperm_runs_hold() {
  for (int64_t k0 = 0; k0 < 256; k0 += 8) {
    if (k0 % 16 == 0 && kperm_block_at(k0 / 16) != kperm_index(k0)) return false;
    for (int m = 0; m < (k0 % 16 == 0 ? 8 : 4); ++m)
      if (kperm_index(k0 + 2 * m) != kperm_index(k0) + 8 * m || kperm_index(k0 + 2 * m + 1) != kperm_index(k0) + 8 * m + 1)
        return false;
  }
  return true;
}
static_assert(kperm_runs_hold(), "kperm: a block's pairs at constant offsets from its base");
// Groups of kFragGroup fragment rows per expert (a last group may hold fewer real rows).
FP4MOE_HD constexpr int frag_groups(int N) { return (N / kFragRows + kFragGroup - 1) / kFragGroup; }
// Fragment blocks per expert (q: * kFragWords words; scales: * frag_scale_bytes bytes).
FP4MOE_HD constexpr int64_t frag_expert_blocks(int N, int Kp) {
  return int64_t(frag_groups(N)) * kFragGroup * (Kp / kFragK);
}
// Index of the block of expert e, fragment row nb, k-block kb (NG = frag_groups(N), KB = Kp / 64).
// The next k-block of the same fragment row is kFragGroup blocks on.
FP4MOE_HD int64_t frag_block(int64_t e, int64_t nb, int64_t kb, int NG, int KB) {
  return ((e * NG + nb / kFragGroup) * KB + kb) * kFragGroup + nb % kFragGroup;
}
FP4MOE_HD int64_t frag_block_index(int64_t e, int64_t n, int64_t k, int N, int Kp) {
  return frag_block(e, n / kFragRows, k / kFragK, frag_groups(N), Kp / kFragK);
}
// Device row of gate (up = false) or up row i of w13.
FP4MOE_HD int64_t w13_device_row(int64_t i, bool up) { return (i / 8) * 16 + (up ? 8 : 0) + i % 8; }

struct NibbleAt {
  int64_t word;  // index into WeightMatrix::q
  int shift;     // the stored code is (frag_word_load(q[word]) >> shift) & 15 (frag_stored_code)
};
// Where the code of (expert e, device row n, k) lives.
FP4MOE_HD NibbleAt frag_nibble(int64_t e, int64_t n, int64_t k, int N, int Kp) {
  const int pos = kperm_position(int(k % 64));  // the k-block's MMA position of logical k
  const int r = int(n % 16), c = pos % 16, kk = pos / 16;
  const int lane = (r % 8) * 4 + (c % 8) / 2;
  const int j = (r / 8) + 2 * (c / 8);
  const int shift = 8 * j + 4 * (c % 2);
  return {frag_block_index(e, n, k, N, Kp) * kFragWords + lane * 4 + kk, shift};
}
// e2m1 code <-> stored code: bits 0 and 1 swapped (its own inverse).
FP4MOE_HD uint32_t frag_stored_code(uint32_t code) { return (code & 0xCu) | ((code & 1u) << 1) | ((code >> 1) & 1u); }

// PRMT (PTX "prmt.b32", default mode): byte i of the result is byte s_i & 7 of {b, a}
// (a = bytes 0-3) for selector nibble s_i, replicated sign when s_i & 8. On the device the
// instruction itself: CUDA's __byte_perm ignores bit 3, which costs a mask (LOP3) per call
// with a run-time selector. The host version is for the tests of frag_decode_word.
FP4MOE_HD uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
#else
  const uint64_t ab = uint64_t(b) << 32 | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (s >> (4 * i)) & 15u;
    uint32_t byte = uint32_t(ab >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * i);
  }
  return r;
#endif
}

// (x & mask) | bits in one LOP3 (PTX lop3.b32, table 0xEA = (a & b) | c); the compiler splits
// it into two when both constants are immediates.
FP4MOE_HD uint32_t and_or(uint32_t x, uint32_t mask, uint32_t bits) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(x), "r"(mask), "r"(bits));
  return d;
#else
  return (x & mask) | bits;
#endif
}

// Where lane (g, t)'s scale bytes sit in the 8 bytes it loads from its fragment block's scales
// (row g's and row g+8's, `ws` = bytes [g * sb / 8, + 8)): the word (0: ws.x, 1: ws.y) and the
// byte of row g; row g+8's is the next byte. One pair for all four k-steps of the block: the
// lane's values are logical k 16t .. 16t + 15 (kperm_position).
FP4MOE_HD void frag_scale_select(int t, bool mx, int* word, int* byte) {
  const int col = mx ? t / 2 : t;  // the 16- or 32-wide scale column of logical k 16t .. 16t + 15
  *word = mx ? 0 : col / 2;
  *byte = (col % 2) * 2;             // bytes [c][half]: column c at byte 2c (mod 4) of its word
}

// Where a code's two halves sit in a word in memory: logical nibble 2j + h (register a_j,
// half h) keeps its low half (bits 1-0) at bit 16 * (j % 2) + 8h + 2 * (j / 2) and its high
// half (bits 3-2) 4 bits above. So bits 1-0 of every nibble of the word hold the selectors of
// a_0 (bits 0-15) and a_1 (bits 16-31), bits 3-2 those of a_2 and a_3, in the order
// PRMT reads them: [low half of low value, high half of low value, low of high, high of high].
FP4MOE_HD int frag_word_position(int nibble) { return 16 * ((nibble / 2) % 2) + 8 * (nibble % 2) + 2 * (nibble / 4); }
// Logical word (8 nibbles) -> the word in memory, and back.
FP4MOE_HD uint32_t frag_word_store(uint32_t logical) {
  uint32_t out = 0;
  for (int n = 0; n < 8; ++n) {
    const uint32_t code = (logical >> (4 * n)) & 15u;
    out |= (code & 3u) << frag_word_position(n) | (code >> 2) << (frag_word_position(n) + 4);
  }
  return out;
}
FP4MOE_HD uint32_t frag_word_load(uint32_t stored) {
  uint32_t out = 0;
  for (int n = 0; n < 8; ++n) {
    const int p = frag_word_position(n);
    out |= (((stored >> p) & 3u) | ((stored >> (p + 4)) & 3u) << 2) << (4 * n);
  }
  return out;
}

// One word in memory -> the four bf16x2 registers a_0..a_3 (low half: nibble 2j, high half:
// nibble 2j + 1), each value e2m1 * 2^-126 exactly (sign at bit 15, exponent bits at 8-7,
// mantissa at 6, as the scale folding expects). The low byte of a value's bf16 depends on
// (mantissa, exponent low) = stored bits 1-0, the high byte on (sign, exponent high) = stored
// bits 3-2: two 4-entry tables in one 8-byte PRMT table, indexed by selector nibbles that the
// memory layout (frag_word_store) already holds in place: per 8 values 4 PRMT, 2 LOP3 and 3
// shifts, or with kHighByF16 1 shift and 2 f16 multiplies (selector_high). (The shifts as
// IMAD.HI on the FMA pipe measured 5-12% slower at every T; as HMUL2, which issues at ~0.8 a
// cycle where the ALU pipe issues ~0.5, 4.9-5.8% faster on the H200 under its power cap, v80.)
// kFragDecodeLow: the table's bytes 0-3 (index (m, e0) -> e0 << 7 | m << 6). The kernels pass
// it in one register (sm80::decode_table). kFragHighTable: the selector bits that point nibbles
// 1 and 3 of each selector at the table's bytes 4-7; a kernel may pass it in a register too.
inline constexpr uint32_t kFragDecodeLow = 0xC0408000u;
inline constexpr uint32_t kFragHighTable = 0x40404040u;
// A selector register's upper 16 bits moved down, for PRMT (which reads bits 0-15 only): by a
// shift (the ALU pipe), or with kHighByF16 in device code by an f16 multiply
// (ptx::high_half_by_f16_mul, the FMA pipe). Exact: with kFragHighTable, a selector's upper half
// is 0b01dd'00dd'01dd'00dd, an f16 of exponent field 16-28, normal.
template <bool kHighByF16>
FP4MOE_HD uint32_t selector_high(uint32_t sel) {
#if defined(__CUDA_ARCH__)
  if constexpr (kHighByF16) return ptx::high_half_by_f16_mul(sel);
#endif
  return sel >> 16;
}
template <bool kHighByF16 = false>
FP4MOE_HD void frag_decode_word(uint32_t q, uint32_t (&a)[4], uint32_t kLow = kFragDecodeLow,
                                uint32_t high_table = kFragHighTable) {
  constexpr uint32_t kHigh = 0x81800100u;  // bytes 4-7: index 4 + (s, e1) -> s << 7 | e1
  constexpr uint32_t kSelBits = 0x33333333u;    // the selector bits of every nibble
  const uint32_t sel01 = and_or(q, kSelBits, high_table);        // a_0: bits 0-15, a_1: bits 16-31
  const uint32_t sel23 = and_or(q >> 2, kSelBits, high_table);   // a_2, a_3
  a[0] = byte_perm(kLow, kHigh, sel01);
  a[1] = byte_perm(kLow, kHigh, selector_high<kHighByF16>(sel01));
  a[2] = byte_perm(kLow, kHigh, sel23);
  a[3] = byte_perm(kLow, kHigh, selector_high<kHighByF16>(sel23));
}
// Byte index of the scale of (expert e, device row n, k).
FP4MOE_HD int64_t frag_scale(int64_t e, int64_t n, int64_t k, int N, int Kp, int block) {
  const int cols = kFragK / block;
  const int r = int(n % 16), c = int((k % 64) / block);
  return frag_block_index(e, n, k, N, Kp) * frag_scale_bytes(block) + (r % 8) * (2 * cols) + c * 2 + r / 8;
}
// The e5m3 code' of a finite, non-zero e4m3 block scale's magnitude (see above).
FP4MOE_HD uint8_t nvfp4_prepared_code(uint8_t e4m3) {
  const uint32_t u = f32_bits(fabsf(e4m3_to_f32(e4m3)));  // 2^-9 .. 448, exact in fp32
  const int e = int(u >> 23) - 127;                      // -9 .. 8
  const uint32_t m = (u >> 20) & 7u;                     // e4m3 values have 3 mantissa bits
  return uint8_t(uint32_t(e + 9) << 3 | m);
}
// The bf16 bits of the folded scale S of a prepared code: what the kernels multiply by.
FP4MOE_HD uint32_t folded_scale_bf16_bits(uint32_t code, int block) {
  return block == 16 ? code * 16u + (236u << 7) : code << 7;
}
// Value of a folded scale code: |scale| * 2^-F (see above; the sign is in the e2m1 codes).
// Exact in fp32.
FP4MOE_HD float folded_scale(uint8_t code, int block) {
  return bits_f32(folded_scale_bf16_bits(code, block) << 16) * exp2i(-126);
}

// h = act(g, u) of SPEC §4 in fp32 (before the bf16 rounding).
FP4MOE_HD float gemm1_activation(float g, float u, Activation act, float alpha, float limit) {
  if (act == Activation::silu) return g * portable_sigmoidf(g) * u;
  g = fminf(g, limit);
  u = fminf(fmaxf(u, -limit), limit);
  return (u + 1.0f) * g * portable_sigmoidf(alpha * g);
}

// fp32 steps that nvcc must not fuse into an FMA (__fmul_rn / __fadd_rn on the device; the
// host code is built with -ffp-contract=off), and the reciprocal 1 / d for 1 <= d < 2^126:
// on the device MUFU.RCP and one Newton step, which is what nvcc emits for an IEEE
// 1.0f / d when d's exponent is in that range (its other inputs take a called slow path).
FP4MOE_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FP4MOE_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FP4MOE_HD float rcp_normal_rn(float d) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return fmaf(r, fmaf(-d, r, 1.0f), r);
#else
  return 1.0f / d;
#endif
}

// The argument bound of gemm1_activation_mid: exp(x) for |x| <= 87 is a normal fp32 number
// (e^-87 > 2^-126) and 1 + exp(x) < 2^126.
inline constexpr float kActivationMidBound = 87.0f;

// gemm1_activation by a straight-line route, bit for bit the same where the argument of its
// exp, x = -g (silu) or -(alpha * g) after the clamp (swiglu_oai), has |x| <= 87, and
// returns true there; elsewhere (|x| > 87, inf, NaN) it returns false, and h means nothing:
// call gemm1_activation. Why the same bits: for such x, portable_expf's
// n = rintf(x * log2 e) is the round to nearest even of adding 1.5 * 2^23 (whose bits then
// hold n in their low bits), its result is a normal number, so that its two-step scale by
// 2^h * 2^(n - h) is the one exact product p * 2^n, and 1 + exp(x) takes the reciprocal's
// fast path (rcp_normal_rn). Why: in the GPU epilogues gemm1_activation took ~55 SASS
// instructions and three divergent branches per value (the range tests, the scale's
// subnormal case, the division's slow path), which also kept ptxas from interleaving a
// column's values; this is about 25 and no branch. (The activation as a template argument,
// which drops the other activation's predicated instructions, measured 0.7-2.6% slower on
// the H200 in v22's one-column epilogue, and 1.3-4.3% faster in v29's groups of 4: the sm90
// kernels' GEMM 1.)
FP4MOE_HD bool gemm1_activation_mid(float g, float u, Activation act, float alpha, float limit, float& h) {
  float x;
  if (act == Activation::silu) {
    x = -g;
  } else {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    x = -mul_rn(alpha, g);
  }
  // No early return: computed for every x (no trap, whatever the values) and kept by the
  // caller only where this is true, so that the route has no branch.
  const bool mid = fabsf(x) <= kActivationMidBound;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: x * log2 e + kRound is rounded to an integer
  const float t = add_rn(mul_rn(x, kPortableLog2e), kRound);
  const float n = add_rn(t, -kRound);
  const float p = portable_exp_poly(portable_exp_reduce(x, n));
  // bits(t) = bits(kRound) + n, and bits(kRound) << 23 wraps to 0: 2^n = (n + 127) << 23.
  const float e = mul_rn(p, bits_f32((f32_bits(t) << 23) + (127u << 23)));
  const float s = rcp_normal_rn(add_rn(1.0f, e));
  h = act == Activation::silu ? mul_rn(mul_rn(g, s), u) : mul_rn(mul_rn(add_rn(u, 1.0f), g), s);
  return mid;
}

// bf16_from_f32(lo) | bf16_from_f32(hi) << 16: both values rounded by format.h's bits, right
// for every input (~7 integer instructions each).
FP4MOE_HD uint32_t bf16x2_by_bits(float lo, float hi) {
  return uint32_t(bf16_from_f32(lo)) | uint32_t(bf16_from_f32(hi)) << 16;
}

#if defined(__CUDACC__)
// bf16x2_by_bits(lo, hi), bit for bit (all 2^32 fp32 patterns on the GPU: bf16_rn_sweep): the
// hardware's round to nearest even, one instruction for both values (ptx::cvt_bf16x2_rn), and
// bf16x2_by_bits where either value is NaN (format.h's quiet NaN keeps the payload). GEMM 1's
// epilogue applies the same rule to a group of pairs at once (one NaN test for the group).
__device__ __forceinline__ uint32_t bf16x2_from_f32(float lo, float hi) {
  uint32_t d = ptx::cvt_bf16x2_rn(lo, hi);
  if (lo != lo || hi != hi) d = bf16x2_by_bits(lo, hi);
  return d;
}
#endif

// The device weights: the only DeviceWeights implementation.
class CudaWeights final : public DeviceWeights {
 public:
  ~CudaWeights() override;
  size_t bytes() const override { return bytes_; }

  LayerDesc desc;
  int device = 0;
  WeightMatrix w13;  // N = 2I (interleaved), K = H
  WeightMatrix w2;   // N = H, K = I
  void* allocations[8] = {};
  size_t bytes_ = 0;
};

// FP4MOE_LOG=1: whether GEMM choices are logged, and gemm_log(line): print `line` to stderr
// the first time it is seen (the line names the shape, so each shape is logged once).
bool gemm_log_on();
void gemm_log(const std::string& line);

// One matrix set in the fragment layout, built on the host (upload_weights' first step):
// canonical (E, rows, K/2) data + (E, rows, K/block) scales + dq[E] -> q, scale, epi as
// WeightMatrix describes them. canonical_row maps a device row n' to its canonical row.
// Throws when an MXFP4 expert spans too many binades to be folded exactly.
struct HostFragments {
  detail::HostArray<uint32_t> q;  // every word written by build_fragments (left uninitialized before)
  std::vector<uint8_t> scale;
  std::vector<float> epi;
};
HostFragments build_fragments(const char* name, const detail::HostBytes& data, const detail::HostBytes& scale,
                              const std::vector<float>& dq, int64_t E, int N, int K, int block,
                              int64_t (*canonical_row)(int64_t, int64_t));

// Internal launchers (arguments already validated by gemm_dispatch.cpp).
void naive_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream);
void naive_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream);
// Every fp32 bit pattern g (2^32, u made from g's bits: any pattern or +-[1, 2)) through
// gemm1_activation_mid on the current device: counts[0] the g it takes, counts[1] those among
// them whose h has other bits than gemm1_activation's (NaN equals NaN). Synchronous (the
// tests' check of the epilogues' route; gemm_naive.cu).
void activation_mid_sweep(Activation act, float alpha, float limit, uint64_t counts[2]);
// Every fp32 bit pattern as lo (hi: another pattern made from it) through bf16x2_from_f32 on the
// current device: the number of pairs whose bits differ from bf16_from_f32's. Synchronous.
uint64_t bf16_rn_sweep();
// Every fp32 bit pattern b through e2m1_from_f32 (sums[0]) and e4m3_from_f32 (sums[1]) on the
// current device, as the sum over b of (code + 1) * fp4_encode_mix(b) mod 2^64: equal to the
// host's sum exactly when every code is (up to cancellation among several differing codes,
// since one differing code changes the sum: the mix is odd). Synchronous.
FP4MOE_HD uint64_t fp4_encode_mix(uint32_t b) { return (uint64_t(b) * 0x9E3779B97F4A7C15ull) | 1u; }
void fp4_encode_checksums(uint64_t sums[2]);
void sm80_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream);
// true: the combine after it may be launched as its programmatic dependent (sm80_pdl)
bool sm80_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream);
// Whether the fast path's kernels run as programmatic dependents (Gemm1Args::after_kernel,
// Gemm2Args::rows_settled) and let their own dependents start early: where the decode kernels
// may (decode_pdl), unless FP4MOE_SM80_PDL=0 (A/B). Measured on the H200 (notes v44 §1, W4A16,
// 11 alternated rounds): qwen3-30b T = 32 / 128 -3.3 / -2.7%, gpt-oss-120b T = 16 -2.7%,
// qwen3-235b T = 8 / 128 -2.0 / -1.2%; kimi-k2 T = 32 -1.5% (5 rounds).
bool sm80_pdl(int device);
// splitk: run the split-K kernels and return true, or return false (not a decode shape, or
// no partials given) and launch nothing; the caller then runs the fast path.
bool splitk_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream);
bool splitk_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream);
// stream: likewise (false: more than 16 rows per active expert, or no scratch given).
bool stream_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream);
bool stream_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream);
// The active-expert list of `rows` into `active` ([1 + num_experts] int32), one launch.
void stream_list_active(const ExpertRows& rows, int64_t num_experts, int32_t* active, cudaStream_t stream);
// sm90: likewise (false: fewer than kSm90MinRowsPerExpert(Mx) rows per active expert, the device
// or build has no sm_90a wgmma code, NVFP4 A, which gemm1/gemm2 stage to bf16 where they can,
// or NVFP4 h without the staging scratch).
bool sm90_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream);
// Whether the wgmma (decode) kernels take GEMM 1 at `rows_bound` rows, as sm90_gemm1
// (decode_gemm1) decides it for a bf16 A, without logging (gemm1_reads_kperm).
bool sm90_gemm1_takes(const CudaWeights& w, int64_t rows_bound);
bool decode_gemm1_takes(const CudaWeights& w, int64_t rows_bound);
bool sm90_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream);
// decode: likewise (false: more than kDecodeTokenTile rows per active expert, enough row
// tiles that K does not split, or NVFP4 A, which gemm1/gemm2 stage to bf16 where they can).
bool decode_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream);
bool decode_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream);

// ---------------------------------------------------------------------------
// mma.sync path configuration (gemm_sm80.cu): a host function, testable without a GPU.
// ---------------------------------------------------------------------------
struct Gemm80Problem {
  int64_t rows_bound = 0;   // upper bound on the rows of all experts together
  int64_t num_experts = 0;  // E_local
  int N = 0, K = 0;         // device rows, K
};
struct Gemm80Config {
  int token_tile = 8;       // tokens per CTA: 8 * n8 tiles per warp (8, 16, 24 or 32)
  int row_tile = 128;       // weight rows per CTA (4 warps x 32)
  int64_t grid_x = 0;       // row tiles
  int64_t tiles = 0;        // bound on (expert, token tile) pairs: sum ceil(count / token_tile)
  int64_t grid_y = 0;       // min(tiles, 65535): CTAs loop over the tile slots
  std::string why;
};
// The token tile: the smallest of 8, 16, 24 that holds all of an expert's rows for all but
// sm80_tile_max_spill(tile) of the experts (rows per expert ~ Poisson(rows_bound / active
// experts): uniform routing), else 32. An expert with more rows than the tile takes another slot
// that decodes its weights again; a larger tile skips the MMAs of its n8 columns without rows,
// yet its loop costs more per weight byte. Measured on the H200 (notes v33: qwen3-30b,
// qwen3-235b, gpt-oss-120b, W4A16): tile 8 beats 16 by 1-2.4% at 5.5 rows per expert (10.6%
// spill) and loses by 3.5-4.8% at 6.5 (20.8%): limit 13% (5.8 rows). Tile 16 beats 24 by 2-3.7%
// at 13 rows (16.5% spill) and loses by 0.8-2.1% at 14 (24.4%): limit 21% (13.7 rows). Tile 24
// against 32 (notes v21): 32 was 3% slower at 2.2% spill; limit 8%. forced_tile (8, 16, 24 or
// 32) replaces the rule.
inline constexpr double kSm80TileMaxSpill[3] = {0.13, 0.21, 0.08};  // tile 8, 16, 24
inline constexpr double sm80_tile_max_spill(int tile) { return kSm80TileMaxSpill[tile / 8 - 1]; }
Gemm80Config choose_config(const Gemm80Problem& p, int forced_tile = 0);
// The forced token tile of the mma.sync launches (0: the rule): the environment's
// FP4MOE_SM80_TILE, read at the first call; set_sm80_token_tile overrides it for the whole
// process (tests run every tile).
int sm80_token_tile();
void set_sm80_token_tile(int tile);

// ---------------------------------------------------------------------------
// split-K decode path configuration (gemm_splitk.cu): a host function, testable without a GPU.
// A CTA (4 warps, 128 weight rows x 8 tokens) streams one K slice of kb_per_split fragment
// blocks; grid (grid_x row tiles, grid_y (expert, token tile) slots, splits). Partial fp32
// sums go to partials [splits][row_space][N]; a second kernel sums them in split order.
// ---------------------------------------------------------------------------
inline constexpr int kSplitKRowTile = 128;     // weight rows per CTA
inline constexpr int kSplitKTokenTile = 8;     // tokens per CTA (one n8 MMA tile)
inline constexpr int kSplitKStageBlocks = 2;   // fragment blocks of K per pipeline stage (BK = 128)
inline constexpr int kSplitKStages = 4;        // pipeline depth
inline constexpr int kSplitKCtasPerSm = 4;     // what the kernel's registers and shared memory allow
inline constexpr int kSplitKMinBlocks = 4;     // smallest K slice (fragment blocks) worth a CTA
inline constexpr int kSplitKMaxSplits = 16;    // bounds the partials workspace
inline constexpr int64_t kSplitKTargetWaves = 2;  // aim for this many full waves of CTAs

struct SplitKProblem {
  int64_t rows_bound = 0;   // upper bound on the rows of all experts together
  int64_t num_experts = 0;  // E_local
  int N = 0, K = 0;         // device rows, K
  int num_sms = 132;        // of the device that runs it
};
struct SplitKConfig {
  bool split = false;       // false: not a decode shape (or nothing to gain), run the fast path
  int64_t grid_x = 0;       // row tiles: ceil(N / 128)
  int64_t tiles = 0;        // bound on (expert, token tile) pairs, as Gemm80Config::tiles
  int64_t grid_y = 0;       // min(tiles, 65535): CTAs loop over the tile slots
  int kb_total = 0;         // Kp / 64 fragment blocks along K
  int kb_per_split = 0;     // fragment blocks per split (the last split may have fewer, never 0)
  int splits = 1;           // ceil(kb_total / kb_per_split)
  int64_t ctas = 0;         // grid_x * tiles * splits (upper bound on the CTAs with work)
  int64_t in_flight_per_sm = 0;  // weight bytes in flight per SM once the pipelines are full
  std::string why;
};
SplitKConfig choose_splitk_config(const SplitKProblem& p);
// fp32 partials of one GEMM: splits * row_space * N * 4, or 0 when it does not split.
size_t splitk_gemm_partials_bytes(const SplitKConfig& c, int64_t row_space, int N);

// ---------------------------------------------------------------------------
// weight-streaming decode path configuration (gemm_stream.cu): a host function, testable
// without a GPU. A unit is (active expert, 32 or 16 weight rows); each warp streams its units over
// the whole K through its own cp.async ring; a grid of at most kStreamCtasPerSm CTAs per SM
// deals the units round-robin. Scratch: the active-expert list, int32 [1 + E].
// ---------------------------------------------------------------------------
inline constexpr int kStreamWarps = 4;        // warps per CTA
inline constexpr int kStreamStages = 8;       // ring depth per warp (one 64-k block column each)
inline constexpr int kStreamCtasPerSm = 4;    // what the kernel's registers and shared memory allow

struct StreamProblem {
  int64_t rows_bound = 0;   // upper bound on the rows of all experts together
  int64_t num_experts = 0;  // E_local
  int N = 0;                // device rows
  int num_sms = 132;
  bool pairs_needed = false;  // units must hold 32 rows (NVFP4 h or NVFP4 A)
};
struct StreamConfig {
  int token_tiles = 0;        // n8 tiles per pass (1 or 2); 0: not a decode shape, run the fast path
  int unit_tiles = 2;         // m16 tiles per unit: 2 (32 rows), or 1 when units would be too few
  int units_per_expert = 0;   // ceil(N / (16 * unit_tiles))
  int64_t grid = 0;           // CTAs
  std::string why;
};
StreamConfig choose_stream_config(const StreamProblem& p);
// Scratch bytes of the stream path: the active-expert list.
size_t stream_scratch_bytes(int64_t num_experts);

// ---------------------------------------------------------------------------
// register-streamed decode path configuration (gemm_decode.cu): a host function, testable
// without a GPU. A CTA is `splits` warps on 32 weight rows (a fragment row pair) x 8 tokens of
// one expert, warp s on k-blocks [s * kb_per_split, (s + 1) * kb_per_split); grid (grid_x row
// pairs, grid_y (expert, token tile) slots) as the fast path's. Taken only where K splits, i.e.
// where the row tiles alone leave SMs short of warps (measured: unsplit it is 2-5% slower than
// the fast path's tiles).
// ---------------------------------------------------------------------------
inline constexpr int kDecodeTokenTile = 8;      // tokens per CTA; more rows per active expert: the tiled paths
inline constexpr int kDecodeMaxSplits = 16;     // warps per CTA
// K splits (rather than the fast path's tiles running) where the row units leave the SMs under
// half of kDecodeWarpsPerSm warps each and K holds two slices of kDecodeMinKbPerSplit k-blocks
// (measured on the H200, kimi-k2 T = 1, 96 registers: 24 -> 118 us, 40 -> 111 us, 64 -> 122 us;
// at 80 registers, 50 beat 40 by 2% on kimi-k2 and deepseek-v3, notes v9).
inline constexpr int kDecodeMinKbPerSplit = 4;
inline constexpr int kDecodeWarpsPerSm = 50;
// "Under half" is warps_wanted_per_unit < kDecodeEdge. A GEMM 2 whose GEMM 1 ran on the decode
// kernels splits from kDecodeEdgeAfterDecode: its launch is that GEMM 1's programmatic
// dependent, and the decode GEMM 1 lets it start once its CTAs have passed their wait (the fast
// path's GEMM 1 lets its dependents start only when it completes), so it streams its first
// weights beside GEMM 1's last CTAs. Measured on the H200 (notes v43 §5, W4A16, 15 alternated
// processes): qwen3-30b T = 8, GEMM 2 at 1.6 wanted warps per unit, 59.7 -> 55.4 us; v44 §1
// (with the fast path's launches as before): qwen3-30b T = 7 -7.3%, qwen3-235b T = 4 -4.0%,
// kimi-k2 / deepseek-v3 T = 2 / 3 -1.0 to -4.2%.
inline constexpr int kDecodeEdge = 2;
inline constexpr int kDecodeEdgeAfterDecode = 1;
// The split itself goes by whole waves of resident CTAs (choose_decode_config): the decode
// kernel's warps resident per SM (4 sub-partitions x floor(16384 / (80 x 32)) registers), and
// a wave's cost beyond its k-blocks, in k-blocks of one warp's stream. Measured on the H200
// against the warps-per-SM rule before it (notes v38, W4A16, medians of 7 alternated
// processes): T = 1 qwen3-235b -10% (GEMM 1 and 2 in two waves -> one), gpt-oss-120b -6.5%,
// qwen3-30b -3% (GEMM 2 in half a wave -> one), kimi-k2 -0.8%; T = 2 -2 / -9 / -11%, qwen3-30b
// T = 3 -18%. A cost of 16 instead of 4 takes fewer slices in fewer, longer waves at T = 3 / 6
// (qwen3-235b, gpt-oss-120b, qwen3-30b) and was 1-3% slower at each of those four points.
inline constexpr int kDecodeResidentWarps = 24;
inline constexpr int kDecodeWaveCost = 4;

// A decode shape, described as for split-K.
using DecodeProblem = SplitKProblem;
struct DecodeConfig {
  bool use = false;         // false: more than kDecodeTokenTile rows per active expert, or K unsplit
  int64_t grid_x = 0;       // row pairs: ceil(N / 32)
  int64_t tiles = 0;        // bound on (expert, token tile) pairs: sum ceil(count / kDecodeTokenTile)
  int64_t grid_y = 0;       // min(tiles, 65535): CTAs loop over the tile slots
  int splits = 1;           // K slices = warps per CTA
  int kb_per_split = 0;     // k-blocks per slice (the last may have fewer, never 0)
  std::string why;
};
// forced_splits > 0 replaces the rule's slice count (at most kDecodeMaxSplits and the k-blocks;
// fewer where that many would leave a slice empty) where the rule splits.
DecodeConfig choose_decode_config(const DecodeProblem& p, int forced_splits = 0, int edge = kDecodeEdge);
// The forced slice count of the decode launches (0: the rule): the environment's
// FP4MOE_DECODE_SPLITS, read at the first call; set_decode_splits overrides it for the whole
// process (tests run every count).
int decode_splits();
void set_decode_splits(int splits);
// How many times the decode kernels were launched in this process (tests: proves they ran).
int64_t decode_launches();

// ---------------------------------------------------------------------------
// Hopper wgmma path configuration (gemm_sm90.cu): a host function, testable without a GPU.
// A CTA (2 warpgroups) computes 256 weight rows x token_tile tokens of one expert; grid
// (grid_x row tiles, grid_y (expert, token tile) slots) as the fast path's.
// ---------------------------------------------------------------------------
inline constexpr int kSm90RowTile = 256;           // weight rows per CTA: 2 warpgroups x 2 m64 tiles
// Below this many rows per active expert the fast path runs. Measured on the H200 (notes v11,
// the fast path against rsws4's 64-token tiles, µs per layer): NVFP4 kimi-k2 T = 512 / 768 /
// 1024 (11 / 16 / 21 rows) 4,029 / 4,938 / 5,459 against 4,146 / 4,347 / 4,457; deepseek-v3
// T = 256 / 512 / 768 (8 / 16 / 24) 2,640 / 3,201 / 3,683 against 2,732 / 2,884 / 3,030;
// qwen3-235b and qwen3-30b even at 16 (-0.4%, +2%), 2-3% faster at 24. MXFP4 (gpt-oss-120b,
// whose fast path decodes one scale per 32 values) T = 512 / 768 / 1024 (16 / 24 / 32):
// 852 / 891 / 939 against 888 / 903 / 918, so it keeps 32. Since the fast path's 24- and
// 32-token tiles (notes v21), wgmma from 25 rows instead of 16 was 6-16% slower on deepseek-v3
// T = 512-768 (16-24 rows), kimi-k2 T = 768 / 1024 and qwen3-235b T = 384, even on qwen3-30b;
// and MXFP4 from 48 instead of 32 35 / 65% slower at 32 / 40 rows (gpt-oss-120b T = 1024 /
// 1280). MXFP4 from 16 (notes v22, since the width split): against 32, gpt-oss-120b T = 768 /
// 896 (24 / 28 rows) -12.5 / -18.2%; against 24, T = 512 / 576 / 640 / 704 (16-22 rows) -1.0 /
// -5.6 / -6.0 / -8.1%. Since the fast path's faster loops (notes v24 / v25), against the fast
// path at 16-24 rows (notes v34, 17-21 processes per point): MXFP4 gpt-oss-120b T = 512 / 576 /
// 640 / 768 (16 / 18 / 20 / 24 rows) -5.2 / -1.3 / -1.2 / +1.9% for the fast path, so MXFP4
// takes wgmma from 22 rows. NVFP4 is mixed at 16 rows (qwen3-30b -6.3%, qwen3-235b -1.9%,
// deepseek-v3 +1.5%, kimi-k2 +2.8%) and the fast path loses from 18 (qwen3-235b +2.2%,
// deepseek-v3 +11.7%), so NVFP4 keeps 16 where the GEMM has many waves of units (256 weight
// rows of one expert each, over the SMs; kSm90MinRowsManyWaves). Below that the fast path runs
// to 17 rows (kSm90MinRowsFewWaves), below kSm90WidthSplitMinWaves to 18 (kSm90MinRowsFewestWaves):
// since rsws4's fold (notes v36, 10 alternated processes per point, the fast path against the
// default then, wgmma from 16), qwen3-30b (5.8 / 7.8 waves) T = 256 / 272 / 288 (16 / 17 / 18
// rows) -6.0 / -7.0 / -2.0% (W4A4 T = 256 -4.1%), qwen3-235b (11.6 / 15.5 waves) T = 256 / 272
// -1.9 / -1.0% (W4A4 T = 256 -1.1%; v34: T = 288 +2.2%), deepseek-v3 (31 / 54 waves) T = 512
// +3.4%, kimi-k2 (47 / 81 waves) T = 768 +2.0%. Past these (notes v37, the fast path to 21
// rows): qwen3-30b T = 304 / 320 / 336 (19 / 20 / 21 rows) W4A16 -1.5 / -0.7 / -0.3% but W4A4
// +5.1 / +5.3 / +5.4% (50 alternated processes per point), qwen3-235b T = 288 / 304 / 320 (18 /
// 19 / 20) +1.4 / +4.5 / +5.1%. Many waves below 16 rows were mixed (wgmma from 13: deepseek-v3
// T = 448 / 480, 14 / 15 rows, +3.9 / -1.6%; kimi-k2 T = 640 / 704 -0.4 / +0.7%). Under the
// power cap (notes v52 §2, after 2 s of replays) the rule held on both sides: wgmma instead of
// the fast path at 8-11 rows +9 to +14%, at 16 MXFP4 rows 0.0%; the fast path instead of wgmma
// at 16-32 rows +1.4 to +30%. The environment's FP4MOE_SM90_MIN_ROWS / FP4MOE_SM90_MIN_ROWS_MX
// replace them, at any waves (A/B).
inline constexpr int kSm90MinRowsPerExpert = 16;
inline constexpr int kSm90MinRowsFewWaves = 18;
inline constexpr int kSm90MinRowsFewestWaves = 19;
inline constexpr int kSm90MinRowsManyWaves = 20;
inline constexpr int kSm90MinRowsPerExpertMx = 22;

struct Sm90Problem {
  int64_t rows_bound = 0;   // upper bound on the rows of all experts together
  int64_t num_experts = 0;  // E_local
  int N = 0, K = 0;         // device rows, K
  int num_sms = 132;        // the device's SMs (the split's rule)
  int block = kNvfp4Block;  // the weights' scale block (WeightMatrix::block): kMxfp4Block is MXFP4
};
// The default kernels split (Sm90Config::split) where rows_bound / 128 full 128-token tiles
// would give at least this many waves of units (256 weight rows each) over the SMs. Measured on
// the H200 (notes v9): at 1.5-2.9 waves the split lost 3-5% (qwen3-30b T = 512 and 1024,
// qwen3-235b T = 512: a near-empty wide launch, two tails); from 5.6 waves it was even or
// 2-13% faster. (From 2 waves where its wide width applies: kSm90SplitWideMinWaves.)
inline constexpr int kSm90SplitMinWaves = 4;
// The split (Sm90Config::split): an expert's rows run as 128-token tiles, but where its last
// tile would hold 64 rows or fewer, that one runs as a 64-token tile, in a second launch. The
// width split (Sm90Config::narrow_width) cuts the last tile again: where it holds at most
// 8 * narrow_width rows it runs in a launch of its own whose wgmma is that narrow (rsws4's
// 64-token tiles unsplit: two launches; the split: three).
// A launch's TileSpan says which of an expert's tiles it runs, with its SpanCut:
//   all     ceil(count / tile) tiles of `tile` rows from row 0 (every unsplit launch)
//   wide    the cut's tiles: count / cut.tile, plus one when count % cut.tile > cut.limit *
//           cut.fold
//   narrow  the last count % cut.tile rows when that is in (cut.floor, cut.limit * cut.fold],
//           as tiles of cut.limit rows (one but where rsws4's width split folds); else none
// The cuts: the split's wide and narrow launches {128, 64, 0}; with a width split, its 64-wide
// narrow launch {128, 64, 8w} and the w-wide one {128, 8w, 0}; rsws4's width split {64, 8w, 0}
// for both of its launches. The split's wide width (Sm90Config::wide_width, v) takes the last
// tiles of 65..8v rows out of the wide launch ({128, 8v, 0}) into one of their own at that
// width ({128, 8v, 64}, span narrow). rsws4's width split may fold (Sm90Config::narrow_fold,
// f): its narrow launch then takes last parts of up to 8wf rows, as tiles of 8w rows, so that
// the few experts past 8w rows need no 64-wide tile in the other launch ({64, 8w, 0, f} both).
enum class TileSpan : int { all = 0, wide = 1, narrow = 2 };
inline constexpr int kSplitWideTile = 128, kSplitNarrowTile = 64;
struct SpanCut {
  int tile = kSplitWideTile;     // rows of a wide tile
  int limit = kSplitNarrowTile;  // the most rows of a narrow tile
  int floor = 0;                 // a narrow tile has more rows than this
  int fold = 1;                  // the narrow launch's most tiles per expert (of `limit` rows each)
};
// tile: the launch's token tile (span all only: wide and narrow count by their cut).
FP4MOE_HD int span_tiles(int count, int tile, TileSpan span, SpanCut cut = SpanCut{}) {
  const int rest = count % cut.tile, most = cut.limit * cut.fold;
  if (span == TileSpan::wide) return count / cut.tile + (rest > most ? 1 : 0);
  if (span == TileSpan::narrow) return rest > cut.floor && rest <= most ? (rest + cut.limit - 1) / cut.limit : 0;
  return (count + tile - 1) / tile;
}
// The row (in the expert's rows) where a launch's tile 0 starts.
FP4MOE_HD int span_first_row(int count, TileSpan span, SpanCut cut = SpanCut{}) {
  return span == TileSpan::narrow ? count - count % cut.tile : 0;
}
// The row (in the expert's rows) of entry j of a launch's tile `t` (tiles of `tile` rows; a
// narrow span's of cut.limit), or -1 where the tile has no such row: past the expert's rows, or
// past a narrow tile's cut.limit (the next tile's). folds = false: the same where cut.fold == 1
// (a narrow span's one tile holds at most cut.limit rows), in fewer instructions (the 128-token
// kernels' producers have no register to spare).
FP4MOE_HD int span_row(int count, int t, int tile, int j, TileSpan span, SpanCut cut = SpanCut{}, bool folds = true) {
  if (!folds) {
    const int r = span_first_row(count, span, cut) + t * tile + j;
    return r < count ? r : -1;
  }
  const int rows = span == TileSpan::narrow ? cut.limit : tile;  // a tile's rows
  const int r = span_first_row(count, span, cut) + t * rows + j;
  return r < count && j < rows ? r : -1;
}
// The width split's narrow widths (n8 tiles of the wgmma N): rsws4 has a kernel for each.
inline constexpr int kMinNarrowWidth = 2, kMaxNarrowWidth = 7;
// rsws4's width split (unsplit) wherever the GEMM has at least this many waves of units (256
// weight rows of one expert each, over the SMs): its extra launch ends on its own last units.
// Measured on the H200 before the launches were programmatic dependents (W4A16, µs per layer,
// split against not): qwen3-235b T = 256 / 512 (11.6-15.5 waves) 637.7 / 656.9 -> 601.0 /
// 623.6, deepseek-v3 T = 512 (31-55) 2,864.9 -> 2,663.5; qwen3-30b T = 256 / 512 (5.8-7.8)
// 198.2 / 207.6 -> 204.0 / 226.0. Below it: kSm90WidthSplitMinGain; the split's widths:
// kSm90SplitWidthMinWaves.
inline constexpr int kSm90WidthSplitMinWaves = 10;
// Below that, rsws4's width split (unsplit, under 64 rows per expert) where the expected
// fraction of MMA width it saves (16 / 24 / 32 / 48 rows: 0.61 / 0.48 / 0.35 / 0.13) times the
// waves is at least this: the second launch runs as a programmatic dependent of the first, so
// its tail costs less. Measured on the H200 (W4A16, two runs each, µs per layer, the width split
// against not; products for GEMM 1 / 2): qwen3-30b T = 256 / 384 / 512 (16 / 24 / 32 rows,
// 5.8 / 7.8 waves: 3.6-4.8, 2.8-3.7, 2.0-2.7) 199.1 / 203.8 / 209.3 -> 177.8 / 197.8 / 208.1
// (W4A4 alike), T = 768 (48: 0.8-1.0) 220.3 -> 230.2; qwen3-235b with E = 64 T = 128 / 256 /
// 384 (16 / 32 / 48) 330.4 / 340.2 / 353.1 -> 290.8 / 327.1 / 353.9; qwen3-30b with E = 64
// (2.9 / 3.9 waves) T = 128 / 256 / 384 (1.8-2.4, 1.0-1.4, 0.4-0.5) 109.4 / 114.3 / 118.6 ->
// 102.7 / 125.8 / 135.9.
inline constexpr double kSm90WidthSplitMinGain = 1.6;
// rsws4's width split folds (Sm90Config::narrow_fold) where the expected experts past the
// narrow width's rows (normal, as narrow_width's rule), times the GEMM's waves of units, is at
// most this: the units folding adds to the narrow launch, against a second launch that runs
// them at 64 wide, few, on their own. Measured on the H200 (W4A16, µs per layer, medians of
// 5 processes, unfolded against both GEMMs folded; GEMM 1 / 2's products): qwen3-30b T = 256
// (0.10 / 0.13) 170.5 -> 166.5, T = 320 (0.91 / 1.22) 173.5 -> 184.4, T = 448 (1.15 / 1.53)
// 188.5 -> 200.9; qwen3-235b T = 256 (0.20 / 0.26) 517.4 -> 515.5, T = 512 (0.77 / 1.03) 579.9
// -> 613.1; deepseek-v3 T = 512 (0.52 / 0.91) 2,307.8 -> 2,364.1, T = 768 (1.28 / 2.25)
// +0.9%; kimi-k2 T = 768 / 1024 (0.78 / 1.37, 0.59 / 1.03) -0.2 / -0.1%; gpt-oss-120b T = 768
// / 1024 (0.92 / 0.48, 1.48 / 0.77) +2.5 / +2.6%. The extra units cost more than the model's
// count says; only the few past the width pay.
inline constexpr double kSm90FoldMaxExtraWaves = 0.2;
// The split's widths (its narrow width and its wide width) from this many waves of units.
// Measured on the H200 (W4A16, two runs each, µs per layer, from 5 against from 10; 5.8 / 7.8
// waves): qwen3-30b T = 2048 / 4096 / 8192 / 16384 497.1 / 869.8 / 1,647.3 / 3,196.9 -> 483.2 /
// 862.4 / 1,650.5 / 3,187.9 (W4A4 T = 2048 / 4096 -2.5 / -1.1%); qwen3-235b with E = 64 T =
// 1024 / 2048 / 4096 775.5 / 1,459.6 / 2,695.4 -> 750.5 / 1,417.6 / 2,694.4.
inline constexpr int kSm90SplitWidthMinWaves = 5;
// Below kSm90SplitMinWaves the split still runs from this many waves of full 128-token tiles
// where its wide width applies (Sm90Config::wide_width < 16). qwen3-30b T = 1024 (64 rows per
// expert, 2.9 / 3.9 waves): 307.9 µs unsplit, 311.9 split, 290.6 split with the wide width n80.
inline constexpr int kSm90SplitWideMinWaves = 2;
// The split's wide widths (n8 tiles of the wgmma N): rsws (128-token tiles) has a kernel for
// each, for last tiles of 65..8v rows (Sm90Config::wide_width).
inline constexpr int kWideWidths[] = {10, 12, 14};

// The least rows per active expert at which the wgmma kernels take a GEMM of `waves` waves of
// units and weights of scale block `block` (kSm90MinRowsPerExpert; not the environment's).
inline int sm90_min_rows(int block, double waves) {
  if (block == kMxfp4Block) return kSm90MinRowsPerExpertMx;
  if (waves >= kSm90MinRowsManyWaves) return kSm90MinRowsPerExpert;
  return waves >= kSm90WidthSplitMinWaves ? kSm90MinRowsFewWaves : kSm90MinRowsFewestWaves;
}

struct Sm90Config {
  bool use = false;         // false: too few rows per expert, run the fast path
  int token_tile = 0;       // tokens per CTA = the wgmma N: 64 or 128 (one launch; with split: 128)
  int64_t grid_x = 0;       // row tiles: ceil(N / 256)
  int64_t tiles = 0;        // bound on (expert, token tile) pairs: sum ceil(count / token_tile)
  int64_t grid_y = 0;       // min(tiles, 65535): CTAs loop over the tile slots
  // Whether the default kernels (sm90_kernel automatic) run split: the wide tiles (rsws, 128
  // tokens) and then the narrow ones (rsws4, 64 tokens), two launches. Else, and with a forced
  // kernel but `split`, one launch of token_tile.
  bool split = false;
  int64_t wide_tiles = 0;    // bound on the wide tiles: sum count / 128 + 1
  int64_t narrow_tiles = 0;  // bound on the narrow tiles: one per expert with rows
  // The width split (rsws4 unsplit, or the split): last tiles of at most 8 * narrow_width
  // rows run in a launch at that wgmma width (TileSpan narrow), chosen for the least expected
  // MMA width over uniform routing's row counts; 8: no width split (kSm90WidthSplitMinWaves,
  // kSm90WidthSplitMinGain; with the split, kSm90SplitWidthMinWaves).
  // Why: a tile's MMA grows with its width, not its rows. H200, W4A16, µs per layer, width
  // split against not (notes v17): kimi-k2 T = 768 / 1024 / 2048 4,206 / 4,301 / 4,783 ->
  // 3,721 / 3,932 / 4,597; deepseek-v3 T = 512 / 1024 2,779 / 3,032 -> 2,382 / 2,848.
  int narrow_width = 8;
  // rsws4's width split (unsplit) folds (SpanCut::fold): its narrow launch takes the last parts
  // of up to 8 * narrow_width * narrow_fold rows, as that many tiles of 8 * narrow_width rows
  // at most; 1: no fold. Folded where few experts pass 8 * narrow_width rows
  // (kSm90FoldMaxExtraWaves): their 64-wide tiles would run alone, in the second launch's tail.
  int narrow_fold = 1;
  // Bound on the narrow launch's tiles when it folds, at any narrow width (narrow_tiles
  // otherwise): one per expert, plus one per kMinNarrowWidth * 8 rows.
  int64_t folded_tiles = 0;
  // The split's wide width: its last tiles of 65..8 * wide_width rows (which would run as
  // 128-token tiles) run in a launch of their own at that wgmma width (kWideWidths), chosen
  // like narrow_width; 16: none. Only with the split and kSm90SplitWidthMinWaves.
  int wide_width = 16;
  std::string why;
};
Sm90Config choose_sm90_config(const Sm90Problem& p);
// "" when `device` runs the wgmma kernels (an sm_90 device, and this build has sm_90a code),
// else why not. Checked once per device.
std::string why_no_sm90(int device);
// How many GEMMs the wgmma kernels ran in this process (tests: proves they ran; a split GEMM
// is one, of two launches), and how many launches each warp-specialized kernel had.
int64_t sm90_launches();
int64_t sm90_ws_launches();
int64_t sm90_rsws_launches();
int64_t sm90_rsws4_launches();
// Which wgmma kernels run: rs (A decoded into registers, every warp loads), ws (SS,
// warp-specialized: producer warpgroups decode A into shared memory for consumer warpgroups),
// rsws (RS, warp-specialized: one producer warpgroup loads, consumer warpgroups decode A into
// registers), rsws4 (rsws with 4 consumer warpgroups of one m-tile per warp; 64-token tiles
// only, rsws takes the 128-token ones), split (rsws on the 128-token tiles and rsws4 on the
// 64-token last ones, Sm90Config::split, two launches), or automatic (the default: split where
// Sm90Config::split says, else rsws4 at 64-token tiles and rsws at 128; on the H200, kimi-k2
// T = 2048 / 8192 / 16384: unsplit 5.90 / 15.45 / 24.5 ms; rsws alone 6.13 / 16.00 at 64
// tokens; rs 7.22 / 18.69 / -, ws - / - / 30.45 in the fourth run; split 5.60 / 13.46 / 24.3
// in the ninth). The environment's FP4MOE_SM90_KERNEL=rs|ws|rsws|rsws4|split forces one, read
// at the first call; set_sm90_kernel overrides it for the whole process (tests run every kernel).
enum class Sm90Kernel { automatic, rs, ws, rsws, rsws4, split };
Sm90Kernel sm90_kernel();
void set_sm90_kernel(Sm90Kernel k);
// The kernel that the wgmma launch of config `c` runs: rs, ws, rsws, rsws4 or split (never automatic).
Sm90Kernel sm90_kernel_for(const Sm90Config& c);
// Tests: launch the persistent (warp-specialized) kernels with at most `ctas` CTAs (0: the default, one per
// SM), so that each CTA walks many (slot, row tile) units.
void set_sm90_ws_grid_limit(int ctas);
// Tests: the width split's narrow width where it applies (kMinNarrowWidth..kMaxNarrowWidth;
// 8: never split; 0: Sm90Config::narrow_width, the default). FP4MOE_SM90_WIDTHS=0 in the
// environment (read per GEMM) also runs every tile at 64.
void set_sm90_narrow_width(int width);
// Tests: rsws4's width split folds at most `fold` tiles per expert (1: never; 0:
// Sm90Config::narrow_fold, the default). FP4MOE_SM90_FOLD=f in the environment (read per GEMM,
// for A/B runs) does too.
void set_sm90_narrow_fold(int fold);
// How many GEMMs ran width split (tests: proves it ran).
int64_t sm90_width_split_launches();
// How many of those folded (tests: proves it ran).
int64_t sm90_folded_launches();
// Tests: the kernels' slot search (gemm_sm80_core.cuh find_slot), one warp per slot, for slots
// [0, slots): each slot's expert (-1 past the real work) and tile among that expert's
// span_tiles(count, tok, span, cut). tok: 8 or 64; per: the experts per lane and step, 8
// (kFindSlotPerLane) or 1 (kSm90FindSlotPerLane). count: device int32 [num_experts]; expert,
// tile: device int32 [slots].
void find_slots_for_test(const int32_t* count, int64_t num_experts, int tok, int per, TileSpan span, SpanCut cut,
                         int64_t slots, int32_t* expert, int32_t* tile, cudaStream_t stream);
// Tests: frag_decode_word of each of n words (device uint32 [n]) on the GPU, its four registers
// per word into out (device uint32 [4 n]); high_by_f16: the selectors' upper halves moved down by
// f16 multiplies (the mma.sync kernels' sm80::kMmaSyncHighByF16), else by shifts.
void frag_decode_words_for_test(const uint32_t* words, int64_t n, bool high_by_f16, uint32_t* out,
                                cudaStream_t stream);
// Tests: ptx::high_half_by_f16_mul of each of n values (device uint32 [n]) into out.
void high_half_by_f16_mul_for_test(const uint32_t* x, int64_t n, uint32_t* out, cudaStream_t stream);
// Tests: the split's wide width where it applies (one of kWideWidths; 16: never; 0:
// Sm90Config::wide_width, the default). FP4MOE_SM90_WIDTHS=0 turns it off too.
void set_sm90_wide_width(int width);
// How many GEMMs ran the split's wide-width launch (tests: proves it ran).
int64_t sm90_wide_width_launches();

// ---------------------------------------------------------------------------
// NVFP4 activations on the wgmma path: staging through bf16 (nvfp4_staging.cu; A staged by
// gemm_dispatch.cpp for every kernel, h by gemm_sm90.cu).
// The wgmma kernels read bf16 activations only. An NVFP4 value e2m1 * e4m3 is exact in bf16
// (at most 2 x 4 = 6 significant bits, magnitudes 0 or in [2^-10, 2688]), so W4A4 runs exactly
// (SPEC §4) as: dequantize A to bf16 (value e2m1 * e4m3, the dq_scale a_dq is the kernel's
// a_mult as for bf16 A); the wgmma GEMM; for GEMM 1 requantize its bf16 h to NVFP4 with the
// fast path epilogue's arithmetic (gemm_sm80_core.cuh epilogue_gemm1), so the bytes are those
// the fast path writes for the same bf16 h.
//
// Scratch (Gemm1Args/Gemm2Args::partials), one region for both GEMMs, sub-buffers 256-byte
// aligned:
//   a_bf16  bf16 [row_space, max(H, I)]  GEMM 1: A rows (indexed as A is: a_gather still
//                                        applies); GEMM 2: h rows (row-space indexed)
//   h_bf16  bf16 [row_space, I]          GEMM 1's h before requantization, when the caller
//                                        asks for NVFP4 h only (else its h_bf16 is used)
// ---------------------------------------------------------------------------
inline constexpr int kStageMaxExperts = 8192;  // the staging kernels scan count[] in shared memory

// Bytes of the a_bf16 section (row_space x max(H, I) bf16, 256-byte aligned): gemm1/gemm2
// stage NVFP4 A there on the sm90 and decode paths (gemm_dispatch.cpp).
size_t a_staging_bytes(int64_t row_space, int64_t H, int64_t I);

struct Sm90Staging {
  bool use = false;  // the wgmma kernels take this shape: NVFP4 activations are staged
  size_t a_bf16 = 0, h_bf16 = 0;  // byte offsets of the sub-buffers (a_bf16: always 0)
  size_t bytes = 0;               // scratch bytes in all; 0 when !use
};
// What the staging needs for a layer of hidden H, intermediate I, E_local experts, at
// `rows_bound` rows in a row space of `row_space`, weights of scale block `block`, on a device
// of `num_sms` SMs: `use` exactly when choose_sm90_config takes GEMM 1 and GEMM 2 (it decides on
// the rows per expert, the GEMM's waves and the format only). Not the device check: the caller
// adds why_no_sm90. Host function, testable without a GPU.
Sm90Staging sm90_staging(int64_t rows_bound, int64_t row_space, int64_t num_experts, int64_t H, int64_t I,
                         int block, int num_sms);

// The bf16 bits of the NVFP4 value e2m1(code) * s, s = e4m3_to_f32(scale code): exact (the
// fp32 product is exact and has at most 6 significant bits, so its top 16 bits are the value;
// a NaN scale gives a NaN).
FP4MOE_HD uint16_t nvfp4_value_bf16(uint8_t code, float s) {
  return uint16_t(f32_bits(e2m1_to_f32(code) * s) >> 16);
}
// Eight codes (a word of NVFP4 data: two per byte, low nibble first) with scale value s ->
// their values as bf16 pairs: v[j] holds values 2j (low half) and 2j + 1.
FP4MOE_HD void nvfp4_values_bf16x8(uint32_t codes, float s, uint32_t (&v)[4]) {
  for (int j = 0; j < 4; ++j) {
    const uint8_t byte = uint8_t(codes >> (8 * j));
    v[j] = uint32_t(nvfp4_value_bf16(unpack_e2m1(byte, 0), s)) | uint32_t(nvfp4_value_bf16(unpack_e2m1(byte, 1), s))
                                                                       << 16;
  }
}

// Eight values x[0..7] (half a 16-block) requantized with the block's inverse scale
// inv and scale value s, as bf16 pairs: v[j] holds the NVFP4 values of x[2j] (low half) and
// x[2j + 1], nvfp4_value_bf16(e2m1_from_f32(x * inv), s) bit for bit, computed without the codes
// (e2m1_round_f32).
FP4MOE_HD void nvfp4_requant_values_bf16x8(const float* x, float inv, float s, uint32_t (&v)[4]) {
  for (int j = 0; j < 4; ++j)
    v[j] = f32_bits(e2m1_round_f32(x[2 * j] * inv) * s) >> 16 |
           (f32_bits(e2m1_round_f32(x[2 * j + 1] * inv) * s) & 0xFFFF0000u);
}

// The staging kernels (nvfp4_staging.cu), on `stream`, each one launch, arguments checked by
// the caller (K % 16 == 0; fp4 8-byte, bf16 16-byte aligned; E_local <= kStageMaxExperts).
// Rows walked: `dense_rows` > 0: rows [0, dense_rows); else the rows of the experts of `rows`
// (begin[e] .. begin[e] + count[e] - 1), and no others.
// bf16 [*, K] <- NVFP4 data [*, K/2], linear e4m3 scales [*, K/16] (nvfp4_value_bf16). Each
// side in KOrder `in` / `out_order` (k-permuted rows: kperm_row(K) long, zeros past K; codes
// k-permuted give k-permuted values only).
void stage_nvfp4_to_bf16(const uint8_t* fp4, const uint8_t* scale, int64_t K, const ExpertRows& rows,
                         int64_t num_experts, int64_t dense_rows, uint16_t* out, cudaStream_t stream,
                         KOrder in = KOrder::logical, KOrder out_order = KOrder::logical);
// NVFP4 data [*, K/2], linear e4m3 scales [*, K/16] with q_scale gs <- bf16 [*, K] (the expert
// rows only), as epilogue_gemm1 requantizes its bf16 h.
void stage_bf16_to_nvfp4(const uint16_t* h, int64_t K, const ExpertRows& rows, int64_t num_experts, float gs,
                         uint8_t* fp4, uint8_t* scale, cudaStream_t stream);
// h [*, K] bf16, in place <- the values (nvfp4_value_bf16) of its NVFP4 requantization with
// q_scale gs, the codes and scales stage_bf16_to_nvfp4 writes (h 16-byte aligned).
void stage_bf16_to_nvfp4_values(uint16_t* h, int64_t K, const ExpertRows& rows, int64_t num_experts, float gs,
                                cudaStream_t stream);

}  // namespace fp4moe::cuda
