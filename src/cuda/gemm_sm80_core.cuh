// The pieces of the mma.sync main loop that gemm_sm80_kernel.cuh (the fast path) and
// gemm_splitk.cu (the split-K decode path) share, and gemm_sm90.cu and gemm_stream.cu
// too: the slot scan, the row tables, the bf16 A-tile swizzle, the weight fragment loads
// and their in-register decode, the epilogues. Swap-AB throughout: weight rows
// are the MMA's M (two m16 tiles per warp), tokens its N (n8 tiles); the fragment layout is
// gemm_internal.hpp's. The NVFP4 A decode stays in each file.
//
// With g = lane / 4, t = lane % 4 (ptx.cuh mma_m16n8k16_bf16). Device code, and the
// host-side gemm1_epilogue.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"

namespace fp4moe::cuda::sm80 {

// An e4m3 code as the bf16 e4m3 * 2^118, broadcast to both halves (NVFP4 activations).
__device__ __forceinline__ uint32_t e4m3_scale_bf16x2(uint32_t code) {
  const float s = ptx::e4m3_times_2p118(code);
  return ptx::pack_bf16x2(s, s);
}

// The folded weight scales S of rows g and g+8, prepared codes in bytes `byte` and `byte` + 1
// of `word`, as a bf16x2 (row g low, row g+8 high): one byte permute ([code_g, 0, code_g8, 0])
// and one integer step for both halves (gemm_internal.hpp folded_scale_bf16_bits): NVFP4
// p * 16 + (236 << 7) per half, MX p * 128.
// mul16: 16 in a register ptxas cannot see through (ptx::per_thread, as for the decode
// table), so that the multiply stays an IMAD on the FMA pipe instead of a LEA on the ALU pipe.
__device__ __forceinline__ uint32_t scale_rows_bf16x2(uint32_t word, int byte, bool mx, uint32_t mul16 = 16u) {
  const uint32_t p = __byte_perm(word, 0u, uint32_t(byte) | 0x40u | uint32_t(byte + 1) << 8 | 0x4000u);
  const uint32_t mul = mx ? mul16 * 8u : mul16, add = mx ? 0u : ((236u << 7) | (236u << 23));
  return p * mul + add;
}

// Lane (g, t)'s scale word of a fragment block: the 4 bytes at byte offset scale_word_offset(g,
// t, sb) of the block's scales hold its rows' codes of column t (MX: t / 2) at byte
// scale_word_byte(t, mx) and the next (gemm_internal.hpp frag_scale_select), for all four
// k-steps. A kernel computes both once.
__device__ __forceinline__ int scale_word_offset(int g, int t, int sb) {
  int word, byte;
  frag_scale_select(t, sb == frag_scale_bytes(32), &word, &byte);
  return g * (sb / 8) + word * 4;
}
__device__ __forceinline__ int scale_word_byte(int t, bool mx) {
  int word, byte;
  frag_scale_select(t, mx, &word, &byte);
  return byte;
}

// Entry j of the row tables of token tile `tile` of expert e, j in [0, kTok) (by default the
// thread index: threads [0, kTok) call it).
//   s_orow [kTok]  output row of token j (begin[e] + tile * kTok + j), -1 past the expert's rows
//   s_arow [kTok]  its A row (through a_gather when given), -1 likewise
// With a span (gemm_internal.hpp TileSpan, cut as its launch's), the tiles are that span's
// (span_row; kFolds false: a launch whose cut never folds).
template <int kTok, bool kFolds = true>
__device__ __forceinline__ void fill_row_tables(int e, int tile, const int32_t* begin, const int32_t* count,
                                                const int32_t* a_gather, int64_t* s_arow, int64_t* s_orow,
                                                int j = int(threadIdx.x), TileSpan span = TileSpan::all,
                                                SpanCut cut = SpanCut{}) {
  const int row_in_expert = span_row(count[e], tile, kTok, j, span, cut, kFolds);
  const bool valid = row_in_expert >= 0;
  const int64_t r = int64_t(begin[e]) + row_in_expert;
  s_orow[j] = valid ? r : -1;
  s_arow[j] = valid ? (a_gather ? int64_t(a_gather[r]) : r) : -1;
}

// find_slot's experts per lane and step (kPer): a step covers 32 * kPer experts. 8 by default
// (the fast-path, split-K and decode kernels); the wgmma kernels take kSm90FindSlotPerLane.
inline constexpr int kFindSlotPerLane = 8;
// 1: in the wgmma kernels 8 per lane cost up to 10% of the layer (W4A16, 6 alternated rounds at
// 1 and 8, µs per layer; notes v47): qwen3-30b T = 512 / 2048 210.4 / 435.9 at 8 against
// 191.8 / 416.4 at 1, qwen3-235b T = 512 613.3 / 582.4, gpt-oss-120b T = 2048 1,010.0 / 974.5.
// Their producer finds each unit's slot between the ring's release and its refill (rsws4: two
// units deep), so the search sits on that path; at 8 it is ~600 SASS instructions more in rsws4
// (eight span_tiles and the hit lane's walk). Skipping span_tiles' division where the span is
// `all` did not recover it (v47 §2). At 1: the presets' E = 128-384 take 4-12 steps of one load.
inline constexpr int kSm90FindSlotPerLane = 1;

// One warp (all 32 lanes): the (expert, token tile) of `slot` from a warp scan over count[]
// (slots are numbered expert after expert, span_tiles(count, kTok, span, cut) each: by default
// ceil(count / kTok)); lane 0 writes them, expert -1 when the slot is past the real work.
// Each step, lane l loads the counts of kPer consecutive experts at once, the warp scans the
// lanes' sums, and the lane whose range holds the slot walks its experts: at kPer = 8 one load
// latency per 256 experts, where a scan of one expert per lane paid one per 32 (kimi-k2, E =
// 384: 12; ncu at T = 1, notes v42: a decode GEMM 2 CTA scanned ~5.4 such chunks in turn, and
// its other warps waited at the barrier after it for 13% of the kernel's samples).
template <int kTok, int kPer = kFindSlotPerLane>
__device__ __forceinline__ void find_slot(int64_t slot, const int32_t* count, int64_t num_experts, int lane,
                                          int* s_expert, int* s_tile, TileSpan span = TileSpan::all,
                                          SpanCut cut = SpanCut{}) {
  int found_e = -1, found_t = 0;
  int64_t base = 0;  // the slots of the experts before this step
  for (int64_t b0 = 0; b0 < num_experts; b0 += 32 * kPer) {
    const int64_t first = b0 + int64_t(lane) * kPer;  // this lane's experts: first .. first + kPer - 1
    int tiles[kPer];
    int sum = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      tiles[i] = first + i < num_experts ? span_tiles(max(count[first + i], 0), kTok, span, cut) : 0;
      sum += tiles[i];
    }
    const int incl = ptx::warp_inclusive_sum(sum, lane);
    const int64_t lo = base + incl - sum;  // this lane's first slot
    const bool hit = slot >= lo && slot < base + incl;
    const unsigned m = __ballot_sync(0xFFFFFFFFu, hit);
    if (m) {
      int e = -1, t = 0;
      if (hit) {
        int s = int(slot - lo);
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          if (e >= 0) continue;
          if (s < tiles[i]) e = int(first) + i, t = s;
          else s -= tiles[i];
        }
      }
      const int src = __ffs(m) - 1;
      found_e = __shfl_sync(0xFFFFFFFFu, e, src);
      found_t = __shfl_sync(0xFFFFFFFFu, t, src);
      break;
    }
    base += __shfl_sync(0xFFFFFFFFu, incl, 31);
  }
  if (lane == 0) {
    *s_expert = found_e;
    *s_tile = found_t;
  }
}

// The start of one (expert, token tile) slot in the tiled kernels, called by every thread:
// warp 0 finds the slot (find_slot), then threads [0, kTok) fill the row tables. Returns the
// expert, or -1 (the same for every thread) when the slot is past the real work, and later
// slots are too. Ends with a barrier: the tables are visible to all.
template <int kTok>
__device__ __forceinline__ int enter_slot(int64_t slot, int warp, int lane, const int32_t* begin, const int32_t* count,
                                          int64_t num_experts, const int32_t* a_gather, int* s_expert, int* s_tile,
                                          int64_t* s_arow, int64_t* s_orow) {
  if (warp == 0) find_slot<kTok>(slot, count, num_experts, lane, s_expert, s_tile);
  __syncthreads();
  const int e = *s_expert;
  if (e < 0) return -1;
  if (threadIdx.x < kTok) fill_row_tables<kTok>(e, *s_tile, begin, count, a_gather, s_arow, s_orow);
  __syncthreads();
  return e;
}

// Each of the warp's accumulators (MT m16 tiles x NT n8 tiles, the layout the epilogues
// read; MT = 2 but in the one-tile wgmma kernel) through a reg_fence (the wgmma kernels):
// after wgmma_wait_group<0>, so that no read of them (the epilogue) is scheduled before the
// wait; after zeroing, so that the zeroes are in place before the first wgmma_fence.
template <int NT, int MT>
__device__ __forceinline__ void fence_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) ptx::reg_fence(acc[mt][nt][c]);
}

// The warp's accumulators, zeroed; FENCED: then passed through fence_acc.
template <int NT, bool FENCED = false, int MT>
__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mt][nt][c] = 0.0f;
  if constexpr (FENCED) fence_acc(acc);
}

// A bf16 A tile is [tok][64 k], 128 B per token; 16-byte chunk ch (k 8ch..8ch+7) of token j
// sits at j * 128 + a_bf16_swizzle(j, ch): chunks are XOR-swizzled by row so that
// ldmatrix's 8 row addresses (8 tokens, one chunk) fall in 8 different bank groups.
__device__ __forceinline__ int a_bf16_swizzle(int j, int ch) { return (ch ^ (j & 7)) * 16; }

// The lane's share of one fragment block in shared memory: its 16 bytes of e2m1 words
// (k-steps 0..3) from `frag` (512 B), and its scale word (scale_word_offset: rows g and g+8 of
// its column) from `scales` + s_off.
__device__ __forceinline__ void load_weight_frag(const uint8_t* frag, const uint8_t* scales, int lane, int s_off,
                                                 uint4& wq, uint32_t& ws) {
  wq = *reinterpret_cast<const uint4*>(frag + lane * 16);
  ws = *reinterpret_cast<const uint32_t*>(scales + s_off);
}
// The same from 32-bit shared addresses (ptx::ld_shared_*): for the rsws consumers, whose loads
// through generic pointers had ptxas recompute the shared window in every trip of the k loop.
__device__ __forceinline__ void load_weight_frag(uint32_t frag, uint32_t scales, int lane, int s_off, uint4& wq,
                                                 uint32_t& ws) {
  wq = ptx::ld_shared_v4(frag + uint32_t(lane * 16));
  ws = ptx::ld_shared_u32(scales + uint32_t(s_off));
}

// The decode table's first register (kFragDecodeLow) for weight_a_frag / frag_decode_word,
// once per kernel: per-thread data (ptx::per_thread with w.zero), which ptxas keeps in one
// vector register; the literal it kept in a uniform register and copied before most PRMT.
__device__ __forceinline__ uint32_t decode_table(const WeightMatrix& w) {
  return ptx::per_thread(kFragDecodeLow, w.zero);
}

// The A operand (weights, rows g / g+8) of k-step kk of one m16 tile, decoded to bf16 in
// registers: per 8 values, the table decode of frag_decode_word and 4 bf16x2 multiplies by
// the folded block scale (exact), each by one half of the rows' scale pair s broadcast
// (ptx::mul_bf16x2_low / _high: operand selectors of the multiply, no extra instruction); s is
// the fragment block's pair (scale_rows_bf16x2 of the lane's scale word), the same for its
// four k-steps (kperm).
// The mma.sync kernels (the fast path, the decode kernels: kMmaSyncHighByF16) move their
// selectors' upper halves down by an f16 multiply (frag_decode_word's kHighByF16): on the H200
// under its power cap, 4.9 / 5.8% faster at deepseek-v3 T = 128 / kimi-k2 T = 8 than by shifts
// (v80). The wgmma kernels keep the shifts: beside a wgmma the FMA pipe's f16 work is as
// contended as the ALU pipe (v61's alu_probe).
inline constexpr bool kMmaSyncHighByF16 = true;

template <bool kHighByF16 = false>
__device__ __forceinline__ void weight_a_frag(uint32_t (&a)[4], const uint4& wq, uint32_t s, int kk,
                                              uint32_t decode_low = kFragDecodeLow,
                                              uint32_t high_table = kFragHighTable) {
  const uint32_t q = kk == 0 ? wq.x : kk == 1 ? wq.y : kk == 2 ? wq.z : wq.w;
  uint32_t v[4];
  frag_decode_word<kHighByF16>(q, v, decode_low, high_table);
  a[0] = ptx::mul_bf16x2_low(v[0], s);
  a[1] = ptx::mul_bf16x2_high(v[1], s);
  a[2] = ptx::mul_bf16x2_low(v[2], s);
  a[3] = ptx::mul_bf16x2_high(v[3], s);
}

// What the epilogues write: GEMM 1 h (bf16, or NVFP4 requantized with q_scale h_gs, as data
// and scales or as its values e2m1 * e4m3 in bf16), GEMM 2 y (fp32).
struct Epilogue {
  Activation act = Activation::silu;
  float alpha = 0.0f, limit = 0.0f;
  uint16_t* h_bf16 = nullptr;
  uint8_t* h_fp4 = nullptr;
  uint8_t* h_scale = nullptr;
  uint16_t* h_values = nullptr;
  float h_gs = 1.0f;
  float* y = nullptr;
};

// GEMM 1's epilogue arguments from the layer and the call.
inline Epilogue gemm1_epilogue(const LayerDesc& d, const Gemm1Args& a) {
  Epilogue e;
  e.act = d.activation;
  e.alpha = d.swiglu_alpha;
  e.limit = d.swiglu_limit;
  e.h_bf16 = a.h_bf16;
  e.h_fp4 = a.h_fp4;
  e.h_scale = a.h_scale;
  e.h_values = a.h_values;
  e.h_gs = a.h_gs;
  return e;
}

// GEMM 1 epilogue of one warp's `tiles` m16 tiles of its MT (fragment rows nbw, nbw + 1; nbw
// even when tiles == 2): acc[mt][nt] holds rows g (c0, c1: gate of i = (nbw + mt) * 8 + g) and
// g + 8 (c2, c3: up of the same i) for tokens nt * 8 + 2t + {0, 1}; out_row(nt, c) is that
// token's output row or -1. h = act(gate * mult + bias, up * mult + bias), rounded to bf16;
// with h_fp4 or h_values (tiles must be 2), the warp's 16 i of one token are one NVFP4 block,
// requantized here (shuffles: all lanes must call this). With MT = 1 (the one-tile wgmma
// kernel, whose callers pass no NVFP4 h) there is no requantization.
//
// The 8-token columns go in groups of kEpiGroup, every column unrolled. A group runs as three
// straight-line phases, each of the first two followed by one branch that is almost never
// taken: every value by the straight-line route (gemm1_activation_mid), then, when any lies
// outside the route's range, gemm1_activation for all of them; every bf16 pair by one
// conversion, then, when any value is NaN, format.h's rounding by bits for all of them; then
// the stores (and the requantization). Why: the epilogue runs with the tensor pipe idle, its
// warps waiting on dependencies in a quarter of their samples (v26's ncu, notes v28 §4), and
// with those two branches in every column ptxas scheduled each column's 4 values as a block
// of their own. On the H200 (notes v28) groups of 8 made kimi-k2 T = 16384 0.4-1.0% faster
// and qwen3-235b 0.4-0.5% against one column at a time, and left the fast path as it was;
// groups of 4 were about as fast, groups of 16 slower (the 128-token GEMM 1 spilled).
template <int NT>
inline constexpr int kEpiGroup = NT < 8 ? NT : 8;

// kAct: the activation when the caller knows it (an Activation's value; then the other
// activation's instructions are not compiled in), or -1: p.act's, at run time.
//
// h is stored k-permuted (gemm_internal.hpp kperm_index), rows of kperm_row(I) entries: value i
// at kperm_index(i), i + 8 (m-tile 1, nbw even) 32 on, and the warp that holds h's last value
// writes the row's zero padding (logical I .. kperm_row(I)) for its tokens.
template <int NT, int kAct = -1, class OutRow, int MT>
__device__ __forceinline__ void epilogue_gemm1(const Epilogue& p, const WeightMatrix& w, int e, int nbw, int g,
                                               float mult, const float (&acc)[MT][NT][4], OutRow out_row,
                                               int tiles = MT) {
  const int I = w.N / 2;
  const int64_t Ir = kperm_row(I);  // h's row length
  static_assert(MT == 1 || MT == 2, "one or two m-tiles");
  const int64_t i_at = kperm_index(nbw * 8 + g);  // value i = nbw * 8 + g; m-tile 1's (i + 8) 32 on
  const Activation act = kAct < 0 ? p.act : Activation(kAct);
  float bg[MT], bu[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int i = (nbw + mt) * 8 + g;
    bg[mt] = w.bias && mt < tiles ? w.bias[int64_t(e) * w.N + i] : 0.0f;
    bu[mt] = w.bias && mt < tiles ? w.bias[int64_t(e) * w.N + I + i] : 0.0f;
  }
  // A known activation in groups of 4: at 8 the 128-token GEMM 1 spilled 132 bytes (ptxas keeps
  // more of its chains in flight). The sm90 kernels' GEMM 1 passes its format's (notes v29).
  constexpr int kG = kAct < 0 ? kEpiGroup<NT> : (NT < 4 ? NT : 4);
  // The pair of values that bf16 pair c of column q holds: m-tiles 0 and 1 of token c (MT = 2),
  // or tokens 0 and 1 (MT = 1).
  constexpr int kPairs = MT == 2 ? 2 : 1;
#pragma unroll
  for (int n0 = 0; n0 < NT; n0 += kG) {
    // The group's values: hv[q][mt][c] for column n0 + q, m-tile mt, token c.
    float hv[kG][MT][2];
    bool rare = false;
#pragma unroll
    for (int q = 0; q < kG && n0 + q < NT; ++q)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float gv = acc[mt][n0 + q][c] * mult + bg[mt];
          const float uv = acc[mt][n0 + q][2 + c] * mult + bu[mt];
          rare |= !gemm1_activation_mid(gv, uv, act, p.alpha, p.limit, hv[q][mt][c]);
        }
    if (rare) {  // (where the route applies the two agree bit for bit, so this redoes all of them)
#pragma unroll
      for (int q = 0; q < kG && n0 + q < NT; ++q)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int c = 0; c < 2; ++c)
            hv[q][mt][c] = gemm1_activation(acc[mt][n0 + q][c] * mult + bg[mt],
                                            acc[mt][n0 + q][2 + c] * mult + bu[mt], act, p.alpha, p.limit);
    }
#pragma unroll
    for (int q = 0; q < kG && n0 + q < NT; ++q)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        if (mt >= tiles) hv[q][mt][0] = hv[q][mt][1] = 0.0f;  // not the warp's: 0, as the requantization's amax expects
    auto lo = [&](int q, int c) { return MT == 2 ? hv[q][0][c] : hv[q][0][0]; };
    auto hi = [&](int q, int c) { return MT == 2 ? hv[q][MT - 1][c] : hv[q][0][1]; };
    // h rounded to bf16, two values per conversion: bf16x2_from_f32's rule, its NaN test once
    // for the group.
    uint32_t d[kG][kPairs];
    bool nan = false;
#pragma unroll
    for (int q = 0; q < kG && n0 + q < NT; ++q)
#pragma unroll
      for (int c = 0; c < kPairs; ++c) {
        d[q][c] = ptx::cvt_bf16x2_rn(lo(q, c), hi(q, c));
        nan |= lo(q, c) != lo(q, c) || hi(q, c) != hi(q, c);
      }
    if (nan) {
#pragma unroll
      for (int q = 0; q < kG && n0 + q < NT; ++q)
#pragma unroll
        for (int c = 0; c < kPairs; ++c)
          d[q][c] = bf16x2_by_bits(lo(q, c), hi(q, c));
    }
#pragma unroll
    for (int q = 0; q < kG && n0 + q < NT; ++q) {
      const int nt = n0 + q;
      uint16_t hb[MT][2];  // the bf16 h of m-tile mt, token c
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) hb[mt][c] = uint16_t(MT == 2 ? d[q][c] >> (16 * mt) : d[q][0] >> (16 * c));
      // Per token one row lookup and one row pointer, its MT values at constant offsets
      // (i = (nbw + mt) * 8 + g). (Per value, the lookup, a 64-bit address, a branch and two
      // roundings by bits took ~25 SASS instructions: ncu had GEMM 1's epilogue at ~73 per
      // value, v26.)
      if (p.h_bf16) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t r = out_row(nt, c);
          if (r < 0) continue;
          uint16_t* const hr = p.h_bf16 + r * Ir + i_at;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            if (mt < tiles) hr[mt * 32] = hb[mt][c];
        }
      }
      if constexpr (MT == 2) {
        if (p.h_fp4 || p.h_values) {
          // The requantization reads h as stored in bf16.
          float hq[2][2];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int c = 0; c < 2; ++c) hq[mt][c] = bf16_to_f32(hb[mt][c]);
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float amax = fmaxf(fabsf(hq[0][c]), fabsf(hq[1][c]));
            amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 4));
            amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 8));
            amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 16));
            const uint8_t sc = nvfp4_scale_code(amax, p.h_gs);
            const float inv = nvfp4_inv_scale(sc, p.h_gs);
            const int64_t r = out_row(nt, c);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              const uint32_t qv = e2m1_from_f32(hq[mt][c] * inv);
              const int64_t at = i_at + mt * 32;  // kperm_index(i): i and i + 1 (g even) side by side
              if (p.h_fp4) {
                const uint32_t q_next = __shfl_xor_sync(0xFFFFFFFFu, qv, 4);  // i + 1 lives in g ^ 1
                if (r >= 0 && (g % 2) == 0) p.h_fp4[r * (Ir / 2) + at / 2] = pack_e2m1(uint8_t(qv), uint8_t(q_next));
              }
              if (p.h_values && r >= 0) p.h_values[r * Ir + at] = nvfp4_value_bf16(uint8_t(qv), e4m3_to_f32(sc));
            }
            if (p.h_fp4 && r >= 0 && g == 0) p.h_scale[r * (I / 16) + nbw * 8 / 16] = sc;
          }
        }
      }
    }
  }
  // The row's zero padding: logical I .. Ir, by the warp whose rows hold value I - 1 (each lane
  // its tokens, values I + g + 8m). The mma.sync and wgmma GEMM 2 read whole k-blocks.
  if (Ir != I && nbw * 8 <= I - 1 && I - 1 < (nbw + tiles) * 8) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t r = out_row(nt, c);
        if (r < 0) continue;
        for (int i = I + g; i < Ir; i += 8) {
          const int64_t at = kperm_index(i);
          if (p.h_bf16) p.h_bf16[r * Ir + at] = 0;
          if (p.h_values) p.h_values[r * Ir + at] = 0;
          if (p.h_fp4 && (i % 2) == 0) p.h_fp4[r * (Ir / 2) + at / 2] = 0;
        }
      }
  }
}

// GEMM 2 epilogue of one warp's `tiles` m16 tiles nbw, nbw + 1, ... of its MT (each only when
// < N / 16): y[row][n] = acc * mult + bias[n], fp32, for device row n = (nbw + mt) * 16 + g (+ 8).
// Per token (nt, c): one out_row lookup and one row pointer for its 2 * MT values, whose
// columns are n0 + {0, 8, 16, 24, ...}: constant offsets. (Looked up per value, the row
// read, its test, a branch and the 64-bit address took ~18 SASS instructions per store;
// ncu had the epilogue at 17% of the 128-token kernel's samples.)
template <int NT, class OutRow, int MT>
__device__ __forceinline__ void epilogue_gemm2(const Epilogue& p, const WeightMatrix& w, int e, int nbw, int g,
                                               float mult, const float (&acc)[MT][NT][4], OutRow out_row,
                                               int tiles = MT) {
  const int NB = w.N / kFragRows;
  const int n0 = nbw * kFragRows + g;
  bool on[MT];
  float b[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    on[mt] = mt < tiles && nbw + mt < NB;
#pragma unroll
    for (int half = 0; half < 2; ++half)
      b[mt][half] = w.bias && on[mt] ? w.bias[int64_t(e) * w.N + n0 + mt * kFragRows + 8 * half] : 0.0f;
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int64_t r = out_row(nt, c);
      if (r < 0) continue;
      float* yr = p.y + r * w.N + n0;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          if (on[mt]) yr[mt * kFragRows + 8 * half] = acc[mt][nt][2 * half + c] * mult + b[mt][half];
    }
}

}  // namespace fp4moe::cuda::sm80
