// The fast path's kernel: the grouped GEMMs on mma.sync tensor cores (sm_80 and later;
// nothing here is sm_90-only).
//
// Swap-AB: weight rows fill the MMA's M = 16, tokens its N = 8, so a decode step with 1-8
// tokens per expert wastes little. A CTA (4 warps) computes 128 weight rows x token_tile
// tokens of one expert; each warp owns 32 rows (two m16 tiles: for GEMM 1 that is gate and
// up of 16 consecutive i, one NVFP4 block of h) and all token_tile tokens. The token tile
// (8, 16, 24 or 32, choose_config) is sized to hold nearly every expert's rows, since an
// expert with more rows than the tile decodes its weights once per tile; n8 columns without
// rows skip their MMAs.
//
// Per 64-wide k step (one fragment block per m16 tile, see gemm_internal.hpp), a 4-stage
// cp.async pipeline brings into shared memory: the CTA's 8 fragment blocks (4 KiB), their
// scales, and the A tile (bf16 [tok][64] with 16-byte chunks XOR-swizzled by row for
// conflict-free ldmatrix; or NVFP4 data [tok][32 B] + scales [tok][4]). Weights are
// decoded to bf16 in registers: per 8 values, 9 integer steps and 4 bf16x2 multiplies by
// the folded block scale (exact); A (bf16) comes from ldmatrix, A (NVFP4) is decoded the
// same way. fp32 accumulation; the epilogue multiplies once by 2^F * w_dq * a_dq.
//
// Work assignment: blockIdx.x = 128-row tile; blockIdx.y walks the (expert, token tile)
// slots; warp 0 finds a slot's expert by a warp scan over count[] (no host sync) and the
// CTA exits when the slot is past the real work. No atomics: results are deterministic.
//
// The kernel and its launches, included by gemm_sm80.cu and gemm_sm80_gemm2.cu (GEMM 1's and
// GEMM 2's instantiations with bf16 A) and gemm_sm80_gemm{1,2}_fp4a.cu (with NVFP4 A): one file
// each keeps each compile near a minute on 2 cores.
#pragma once

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "cuda/common/check.hpp"
#include "cuda/common/env.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"

namespace fp4moe::cuda::sm80 {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowTile = kWarps * 2 * kFragRows;  // 128 weight rows
constexpr int kBlocksPerCta = kRowTile / kFragRows;  // 8 fragment blocks

template <int NT, bool A_FP4>
struct Tile {
  // k-blocks per CTA barrier: 4 at 8-token tiles (8 stages, 44 KiB), 2 above, where 8 stages
  // would pass the 48 KiB of static shared memory. Measured on the H200 (v24 notes): 4 instead
  // of 2 at 8-token tiles -1.4 to -3.9% (kimi-k2, qwen3-235b, gpt-oss-120b T = 32 / 128); 3
  // (6 stages, a stage index mod 6) +1 to +2%.
  static constexpr int kPair = NT == 1 ? 4 : 2;
  static constexpr int kStages = 2 * kPair;  // those being computed and those being loaded
  static constexpr int kTok = 8 * NT;
  static constexpr int kWBytes = kBlocksPerCta * kFragWords * 4;  // 4 KiB
  static constexpr int kSBytes = kBlocksPerCta * 64;              // room for NVFP4's 64 B per block
  static constexpr int kADataBytes = A_FP4 ? kTok * 32 : kTok * 128;
  static constexpr int kAScaleBytes = A_FP4 ? kTok * 4 : 0;
  static constexpr int kStageBytes = kWBytes + kSBytes + kADataBytes + kAScaleBytes;
  static constexpr int kSmem = kStages * kStageBytes;
  static_assert(kSmem + kTok * 16 + 64 <= 48 * 1024,
                "the pipeline and the row tables must fit in the 48 KiB of static shared memory");
  static_assert(kStageBytes % 16 == 0 && kADataBytes % 16 == 0, "cp.async destinations must stay 16-byte aligned");
  static_assert(kTok <= kThreads, "one thread per token row fills the row tables");
};

struct Params {
  WeightMatrix w;
  ExpertRows rows;
  const uint16_t* a_bf16;
  const uint8_t* a_fp4;
  const uint8_t* a_scale;
  const int32_t* a_gather;
  float a_mult;  // a_dq, times 2^8 for NVFP4 A (its tiles are decoded as e2m1 * e4m3 * 2^-8)
  int64_t tiles;
  int inside_min_kb;  // the fewest k-blocks (KB) for which the loads inside K run untested (A/B)
  sm80::Epilogue epi;
};

// CTAs per SM asked of ptxas: 16-token tiles with bf16 A 5 (at most 102 registers), as they ran
// before their loops inside K took the live columns as constants (which left them 106-108, 4 CTAs).
// The sm_100 code of the 24-token tiles with bf16 A asks for 3: at 4 (128 registers) ptxas's
// sm_100 schedule spilled 68-128 bytes in the k loop, where sm_80 and sm_90a spill nothing.
template <int NT, bool A_FP4>
constexpr int min_ctas_per_sm() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  if (NT == 3 && !A_FP4) return 3;
#endif
  return NT == 4 ? 2 : (A_FP4 && NT >= 2) ? 3 : NT == 2 ? 5 : 4;
}

// MX: the weights' scales are MX exponents (w.block == 32), known at compile time so that the
// scale selection of every k-step folds to constants (ptxas recomputed it per k-block).
template <int NT, bool A_FP4, bool GEMM1, bool MX>
__global__ void __launch_bounds__(kThreads, min_ctas_per_sm<NT, A_FP4>()) sm80_grouped_gemm(const Params p) {
  using T = Tile<NT, A_FP4>;
  constexpr int kPair = T::kPair;
  constexpr int kTok = T::kTok;
  __shared__ __align__(128) uint8_t smem[T::kSmem];
  __shared__ int s_expert, s_tile;
  __shared__ int64_t s_arow[kTok];  // A row of token j, -1 past the expert's rows
  __shared__ int64_t s_orow[kTok];  // output row of token j, -1 past the expert's rows

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows, K = w.K;
  // A's row length and the k its loads stop at: GEMM 1's x is logical (K), GEMM 2's h
  // k-permuted, its rows kperm_row(K) = Kp long with zeros past K (gemm_internal.hpp).
  const int a_row = GEMM1 ? K : w.Kp;
  static_assert(kBlocksPerCta == kFragGroup, "a CTA's rows are one group of the layout");
  const int nb0 = blockIdx.x * kBlocksPerCta;
  constexpr bool mx = MX;
  const int sb = frag_scale_bytes(MX ? 32 : 16);
  uint32_t decode_low = sm80::decode_table(w);
  uint32_t mul16 = ptx::per_thread(16u, w.zero);  // the folded scale's multiplier as IMAD, not LEA
  uint32_t high_table = ptx::per_thread(kFragHighTable, w.zero);
  // This thread's shared-memory reads of a k-block, as byte offsets from stage 0 (a stage, an
  // m16 tile and an n8 column add constants): its 16 bytes of fragment words of block
  // b = 2 * warp (+ mt: 512 bytes on), its scale word (rows g and g+8 of column t, + mt: 64 on),
  // and its B address of k-steps 2kp, 2kp+1 (+ nt: 1,024 on): GEMM 1 reads x in logical order,
  // lane t's b0, b1 of k-steps 2kp, 2kp + 1 being logical k 16t + 8kp .. + 7 of token g, one
  // 16-byte chunk (2t + kp; kperm); GEMM 2 reads h, stored k-permuted, by ldmatrix (row
  // lane % 8, chunk 4kp + lane / 8). Through reg_fence, as the decode's constants: without,
  // the compiler rebuilt all of them from the thread index in every trip of the k loop (~30 of
  // its ~1,180 SASS instructions at 8-token tiles).
  const uint32_t smem32 = uint32_t(__cvta_generic_to_shared(smem));
  uint32_t w_lds = uint32_t(warp) * 1024u + uint32_t(lane) * 16u;
  uint32_t s_lds = uint32_t(T::kWBytes) + uint32_t(warp) * 128u + uint32_t(sm80::scale_word_offset(g, t, sb));
  uint32_t s_byte = ptx::per_thread(uint32_t(sm80::scale_word_byte(t, mx)), w.zero);
  uint32_t a_lds[2];
#pragma unroll
  for (int kp = 0; kp < 2; ++kp)
    a_lds[kp] = GEMM1 ? uint32_t(T::kWBytes + T::kSBytes + g * 128 + sm80::a_bf16_swizzle(g, 2 * t + kp))
                      : uint32_t(T::kWBytes + T::kSBytes + (lane % 8) * 128 +
                                 sm80::a_bf16_swizzle(lane % 8, kp * 4 + lane / 8));
  ptx::reg_fence(decode_low);
  ptx::reg_fence(mul16);
  ptx::reg_fence(high_table);
  ptx::reg_fence(w_lds);
  ptx::reg_fence(s_lds);
  ptx::reg_fence(s_byte);
  ptx::reg_fence(a_lds[0]);
  ptx::reg_fence(a_lds[1]);
  // As a programmatic dependent (launch's `dependent`): GEMM 1 reads the rows, A and its gather,
  // all written by the kernels before it, so it waits first. GEMM 2's rows were complete before
  // the grid before it let it start (Gemm2Args::rows_settled), so it finds its slot and requests
  // its first weights, and waits only before its first A (h) loads. Either then lets its own
  // dependent start: GEMM 2's CTAs take the SMs this grid's last CTAs leave. Both immediate when
  // launched normally.
  if constexpr (GEMM1) ptx::grid_dependency_wait();
  ptx::grid_dependency_trigger();

  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    const int e = sm80::enter_slot<kTok>(slot, warp, lane, p.rows.begin, p.rows.count, w.num_experts, p.a_gather,
                                         &s_expert, &s_tile, s_arow, s_orow);
    if (e < 0) {  // past the real work; later slots are too
      // GEMM 2 as a dependent: a grid that ends without waiting could complete before GEMM 1
      // does, and its own dependent's wait would then not cover GEMM 1
      if constexpr (!GEMM1) ptx::grid_dependency_wait();
      return;
    }
    // The n8 columns with rows (a tile's rows fill it from column 0): the others' B loads and
    // MMAs are skipped (warp-uniform), so a tile larger than most experts' rows costs little.
    int live = 1;
#pragma unroll
    for (int nt = 1; nt < NT; ++nt) live += s_orow[nt * 8] >= 0;

    // ---- the pipeline ----
    // Each thread's cp.async sources are fixed for the slot up to a per-k-step stride, so
    // they are computed here once (the k loop then spends its instructions on the math):
    // weights kWChunks 16-byte chunks of the warp's part of a group (below; + a group's bytes:
    // one pointer, the chunks at constant offsets; with a pointer per chunk in different blocks
    // the k loop had ~6% more instructions at 8 and 16 tokens, ~2.5% at 32), the scales of one
    // 16-byte block part for the first kBlocksPerCta * sb / 16 threads (+ kb * 8 sb), and up to
    // kAChunks chunks of the A tile (+ kb * 64 k).
    // Weights: the CTA's 8 fragment rows are group blockIdx.x (nb0 = 8 * blockIdx.x), whose
    // k-block kb is 4 KiB in a row and kb + 1 the next 4 KiB (gemm_internal.hpp frag_block).
    // Each warp loads its part of one k-block of a group: warp w part w % kWarpsPerKb of
    // k-block w / kWarpsPerKb, kWChunks 16-byte chunks 512 bytes apart, so that a thread's
    // chunks of a group lie within one window of cp.async's 12-bit signed offset (one pointer a
    // thread, the chunks at constant offsets -2048 .. 2047 from it); with every thread's chunks
    // in every k-block of the group (4 KiB apart), each k-block after the first took a 64-bit
    // add. A last group's rows past N are zeros in the layout, loaded like the others (their
    // outputs are not written).
    constexpr int kWarpsPerKb = kWarps / kPair;                       // 1 (8-token tiles) or 2
    constexpr int kWPart = kFragGroup * kFragWords * 4 / kWarpsPerKb;  // bytes a warp loads per group
    constexpr int kWChunks = kWPart / 512;                             // 8 or 4 a thread
    constexpr int kWCenter = kWChunks > 4 ? 2048 : 0;                  // the pointer's offset into its part
    static_assert(kWarps % kPair == 0 && kWChunks * 512 == kWPart, "whole k-blocks over whole warps");
    constexpr int kAChunksAll = A_FP4 ? kTok * 4 : kTok * 8;
    constexpr int kAChunks = (kAChunksAll + kThreads - 1) / kThreads;
    const int w_kb = warp / kWarpsPerKb;  // the warp's k-block of each group (warp-uniform)
    const int w_dst = w_kb * T::kStageBytes + (warp % kWarpsPerKb) * kWPart + lane * 16;  // from stage 0
    // (e * NBp + nb0) * KB is frag_block(e, nb0, 0, ..) for nb0 a multiple of 8
    // (gemm_internal.hpp), written out. With the group count computed here (frag_groups(N))
    // the 8-token GEMM 1 took 98 registers (4 CTAs an SM) through frag_block, or 94-96 and ~30
    // more instructions a trip of its k loop written out (v74).
    const int NBp = w.groups * kFragGroup;
    const uint8_t* w_src = reinterpret_cast<const uint8_t*>(w.q) + (int64_t(e) * NBp + nb0) * KB * (kFragWords * 4) +
                           w_kb * (kFragGroup * kFragWords * 4) + (warp % kWarpsPerKb) * kWPart + lane * 16 +
                           kWCenter;
    const int s_part = sb / 16;
    const bool s_on = threadIdx.x < kBlocksPerCta * s_part && nb0 + int(threadIdx.x) / s_part < NB;
    const uint8_t* s_src =
        w.scale + (int64_t(e) * NBp + nb0) * KB * sb + (threadIdx.x / s_part) * sb + (threadIdx.x % s_part) * 16;
    const int s_dst = T::kWBytes + (threadIdx.x / s_part) * 64 + (threadIdx.x % s_part) * 16;
    const uint8_t* a_src[kAChunks];  // the token row's first chunk, or nullptr past the expert's rows
    int a_dst[kAChunks], a_k[kAChunks];
    uint32_t a_sh[kAChunks];  // the chunk's shared address in stage 0 (bf16 A)
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      const int c = threadIdx.x + i * kThreads;
      const int j = A_FP4 ? c / 4 : c / 8, ch = A_FP4 ? c % 4 : c % 8;
      const int64_t row = c < kAChunksAll ? s_arow[j] : -1;
      a_k[i] = A_FP4 ? ch * 16 : ch * 8;
      a_dst[i] = A_FP4 ? j * 32 + ch * 8 : j * 128 + sm80::a_bf16_swizzle(j, ch);
      a_sh[i] = smem32 + uint32_t(T::kWBytes + T::kSBytes + a_dst[i]);
      ptx::reg_fence(a_sh[i]);  // (as w_lds: kept, not rebuilt per k-block)
      a_src[i] = row < 0 ? nullptr
                 : A_FP4 ? p.a_fp4 + row * (a_row / 2) + a_k[i] / 2
                         : reinterpret_cast<const uint8_t*>(p.a_bf16 + row * a_row + a_k[i]);
    }

    // The sources of the group being loaded: k-block kb0 of the group at w_at / s_at / a_at, its
    // k-block kb0 + o at constant offsets o * stride from them; advanced by a group after each.
    // (Built from w_src / s_src / a_src rather than in their place: one loop setting a_ok and
    // a_at directly, sm_90a, gave 8-32 more instructions in every instantiation and 2-5 more
    // registers in 15 of the 32, 2 fewer in 4.)
    // Per k-block: a group's words and scales, and the A tile's k-block.
    constexpr int kWBlockBytes = kFragGroup * kFragWords * 4, kABlockBytes = A_FP4 ? kFragK / 2 : kFragK * 2;
    const int s_step = kFragGroup * sb;
    const uint8_t* w_at = w_src;
    const uint8_t* s_at = s_src;
    const uint8_t* a_at[kAChunks];  // past the expert's rows: A's base, never read (a_ok false)
    bool a_ok[kAChunks];
    const uint8_t* a_base = A_FP4 ? p.a_fp4 : reinterpret_cast<const uint8_t*>(p.a_bf16);
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      a_ok[i] = a_src[i] != nullptr;
      a_at[i] = a_ok[i] ? a_src[i] : a_base;
    }
    auto advance = [&](int n) {  // n: kPair (one group)
      w_at += n * kWBlockBytes;
      s_at += n * s_step;
#pragma unroll
      for (int i = 0; i < kAChunks; ++i) a_at[i] += n * kABlockBytes;
    };
    // k-block kb (offset o from the sources) into stage `stage` (a constant once unrolled): its
    // weights and scales (load_w), then its A tile (load_a). `inside` (a constant): the k-block is
    // inside K and K is a whole number of k-blocks (the groups before the last), so no A chunk
    // ends past K: A's predicate is a_ok alone and its source a_at (A's base, advanced, where
    // a_ok is false: inside A, never read).
    // The weights of the group whose first k-block is kbf, into stages [hh * kPair, + kPair):
    // this warp's part of its k-block kbf + w_kb (none past K; `inside`, a constant: the group
    // is inside K).
    auto load_w_group = [&](int hh, int kbf, auto inside) {
      if (!inside.value && kbf + w_kb >= KB) return;  // warp-uniform
      uint8_t* st = smem + hh * kPair * T::kStageBytes + w_dst;
#pragma unroll
      for (int i = 0; i < kWChunks; ++i) ptx::cp_async_16(st + i * 512, w_at + (i * 512 - kWCenter), true);
    };
    auto load_s = [&](int stage, int o) {
      if (s_on) ptx::cp_async_16(smem + stage * T::kStageBytes + s_dst, s_at + o * s_step, true);
    };
    auto load_a = [&](int stage, int kb, int o, auto inside) {
      [[maybe_unused]] uint8_t* sa = smem + stage * T::kStageBytes + T::kWBytes + T::kSBytes;  // NVFP4 A
#pragma unroll
      for (int i = 0; i < kAChunks; ++i) {
        if (kAChunksAll % kThreads != 0 && threadIdx.x + i * kThreads >= kAChunksAll) break;
        const bool valid = a_ok[i] && (inside.value || kb * kFragK + a_k[i] < a_row);
        const uint8_t* src = inside.value || valid ? a_at[i] + o * kABlockBytes : a_base;
        if constexpr (!A_FP4) {
          ptx::cp_async_16(a_sh[i] + uint32_t(stage * T::kStageBytes), src, valid);
        } else {
          ptx::cp_async_8(sa + a_dst[i], src, valid);
          // scale rows (K/16 bytes, logical blocks) need not be 4-byte aligned: plain loads, seen
          // after the barrier; a block past K (h's padding) scales by 0
          const int j = (threadIdx.x + i * kThreads) / 4, ch = (threadIdx.x + i * kThreads) % 4;
          sa[T::kADataBytes + j * 4 + ch] = valid && (inside.value || kb * kFragK + a_k[i] < K)
                                                ? p.a_scale[s_arow[j] * (K / 16) + (kb * kFragK + a_k[i]) / 16]
                                                : uint8_t(0);
        }
      }
    };
    auto load_stage = [&](int stage, int kb, int o, auto inside) {
      load_s(stage, o);
      load_a(stage, kb, o, inside);
    };

    float acc[2][NT][4];
    sm80::zero_acc<NT>(acc);

    // kPair k-blocks per CTA barrier and per cp.async group (ncu, kimi-k2 T = 512: 16% of the
    // warps' samples were barrier stalls with one per k-block). kStages = 2 * kPair: after the
    // barrier of k-blocks kb .. kb + kPair - 1 every warp is done with the kPair before them,
    // whose stages then take kb + kPair .., loaded while kb .. are computed.
    // lv: the live n8 columns, `live` or (16-token tiles inside K) a constant 1 or 2.
    auto k_block = [&](int stage, auto lv) {  // the k-block in stage `stage` (a constant once unrolled)
      const uint8_t* st = smem + stage * T::kStageBytes;
      uint4 wq[2];
      uint32_t sp[2];  // the rows' scale pair, once for the block's four k-steps (kperm)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {  // at the offsets above (which hold the lane's parts: 0, 0)
        uint32_t ws;
        sm80::load_weight_frag(st + (w_lds + mt * (kFragWords * 4)), st + (s_lds + mt * 64), 0, 0, wq[mt], ws);
        sp[mt] = sm80::scale_rows_bf16x2(ws, int(s_byte), mx, mul16);
      }
#pragma unroll
      for (int kp = 0; kp < 2; ++kp) {  // k-steps 2kp, 2kp+1
        uint32_t bfrag[NT][4];          // b0, b1 of k-step 2kp, then of 2kp+1
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if (nt >= int(lv)) break;
          if constexpr (!A_FP4) {
            if constexpr (GEMM1) {  // token nt * 8 + g, logical k 16t + 8kp .. + 7
              const uint4 v = *reinterpret_cast<const uint4*>(st + (a_lds[kp] + nt * 1024));
              bfrag[nt][0] = v.x, bfrag[nt][1] = v.y, bfrag[nt][2] = v.z, bfrag[nt][3] = v.w;
            } else {
              ptx::ldmatrix_x4(bfrag[nt], st + (a_lds[kp] + nt * 1024));  // token nt * 8 + lane % 8
            }
          } else {
            // NVFP4 A, data [tok][32 B] + scales [tok][4]: every k-step of lane t is in block t
            // (kperm). GEMM 1's x is logical (b0, b1 of k-step kk: bytes 8t + 2kk, + 1), GEMM 2's
            // h k-permuted (bytes 8kk + t, 8kk + 4 + t).
            const uint8_t* sa = st + T::kWBytes + T::kSBytes;
            const int j = nt * 8 + g;
            const uint32_t sc = sm80::e4m3_scale_bf16x2(sa[T::kADataBytes + j * 4 + t]);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int kk = 2 * kp + h;
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                const uint32_t x = sa[j * 32 + (GEMM1 ? 8 * t + 2 * kk + half : kk * 8 + half * 4 + t)];
                bfrag[nt][2 * h + half] = ptx::mul_bf16x2(ptx::e2m1x2_top_nibbles_to_bf16x2((x << 12) | (x << 24)), sc);
              }
            }
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int kk = 2 * kp + h;
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            uint32_t a[4];
            sm80::weight_a_frag<sm80::kMmaSyncHighByF16>(a, wq[mt], sp[mt], kk, decode_low, high_table);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
              if (nt < int(lv)) ptx::mma_m16n8k16_bf16(acc[mt][nt], a, bfrag[nt][2 * h], bfrag[nt][2 * h + 1]);
          }
        }
      }
    };
    // The first group: its weights, then (GEMM 2 as a dependent: once GEMM 1 has completed) its
    // A tiles, all in one cp.async group.
    load_w_group(0, 0, std::false_type{});
#pragma unroll
    for (int s = 0; s < kPair; ++s)
      if (s < KB) load_s(s, s);
    if constexpr (!GEMM1) ptx::grid_dependency_wait();
#pragma unroll
    for (int s = 0; s < kPair; ++s)
      if (s < KB) load_a(s, s, s, std::false_type{});
    ptx::cp_async_commit_group();
    advance(kPair);
    // The group of k-blocks kb .. kb + kPair - 1 in stages [h * kPair, + kPair): two groups per
    // iteration, so that every stage index is a constant (smem offsets as immediates): 10-20%
    // fewer instructions per k-block; on the H200 (v25 notes) qwen3-235b T = 128 -7.9%, kimi-k2
    // T = 512 -5.8%, gpt-oss-120b T = 32 / 128 -2.4 / -3.5%. More CTAs per SM by
    // __launch_bounds__ (fewer registers) lost those gains.
    // `inside` (a constant): every k-block this group loads and computes is inside K, and K is a
    // whole number of k-blocks, so no load or k-block needs its own test.
    auto group = [&](auto h, auto inside, int kb, auto lv) {
      ptx::cp_async_wait_group<0>();  // k-blocks kb .. kb + kPair - 1 landed (the newest group)
      __syncthreads();  // their stages visible to all; the kPair before them consumed by all warps
      load_w_group(1 - h.value, kb + kPair, inside);
#pragma unroll
      for (int i = 0; i < kPair; ++i)
        if (inside.value || kb + kPair + i < KB) load_stage((1 - h.value) * kPair + i, kb + kPair + i, i, inside);
      ptx::cp_async_commit_group();
      advance(kPair);
      k_block(h.value * kPair, lv);
#pragma unroll
      for (int i = 1; i < kPair; ++i)
        if (inside.value || kb + i < KB) k_block(h.value * kPair + i, lv);
    };
    using Zero = std::integral_constant<int, 0>;
    using One = std::integral_constant<int, 1>;
    int kb = 0;
    auto inside_loop = [&](auto lv) {
      for (; kb + 3 * kPair <= KB; kb += 2 * kPair) {  // loads up to kb + 3 kPair - 1
        group(Zero{}, std::true_type{}, kb, lv);
        group(One{}, std::true_type{}, kb + kPair, lv);
      }
    };
    if (K % kFragK == 0 && KB >= p.inside_min_kb) {
      // 16-token tiles: one loop per count of live columns, each with it as a constant (its B
      // loads and MMAs untested); the wider tiles keep the tests (a loop per count would copy
      // the k loop 3-4 times).
      if constexpr (NT == 2) {
        if (live == 2) inside_loop(std::integral_constant<int, 2>{});
        else inside_loop(std::integral_constant<int, 1>{});
      } else {
        inside_loop(live);
      }
    }
    for (; kb < KB; kb += 2 * kPair) {
      group(Zero{}, std::false_type{}, kb, live);
      if (kb + kPair < KB) group(One{}, std::false_type{}, kb + kPair, live);
    }
    ptx::cp_async_wait_group<0>();

    // ---- epilogue: acc[mt][nt] rows g (c0, c1) and g+8 (c2, c3), tokens nt*8 + 2t + {0, 1} ----
    const int nbw = nb0 + 2 * warp;  // the warp's first fragment row (even)
    if (nbw < NB) {                   // NB is even for GEMM 1, so both m16 tiles are real
      const float mult = w.epi[e] * p.a_mult;
      auto out_row = [&](int nt, int c) { return s_orow[nt * 8 + 2 * t + c]; };
      if constexpr (GEMM1) sm80::epilogue_gemm1<NT>(p.epi, w, e, nbw, g, mult, acc, out_row);
      else sm80::epilogue_gemm2<NT>(p.epi, w, e, nbw, g, mult, acc, out_row);
    }
    __syncthreads();  // the row tables and stages are reused by the next slot
  }
}

// The listed instantiations: token tile {8, 16, 24, 32} x A {bf16, NVFP4} x {GEMM 1, GEMM 2} x
// weight scales {NVFP4, MX}, MX with bf16 A only.
// dependent: as the programmatic dependent of the kernel before it on the stream (launch.cuh).
template <bool A_FP4, bool GEMM1, bool MX>
void launch(const Gemm80Config& c, const Params& p, bool dependent, cudaStream_t stream) {
  const dim3 grid(unsigned(c.grid_x), unsigned(c.grid_y)), block(kThreads);
  switch (c.token_tile) {
    case 8: launch_kernel(sm80_grouped_gemm<1, A_FP4, GEMM1, MX>, grid, block, 0, dependent, stream, p); break;
    case 16: launch_kernel(sm80_grouped_gemm<2, A_FP4, GEMM1, MX>, grid, block, 0, dependent, stream, p); break;
    case 24: launch_kernel(sm80_grouped_gemm<3, A_FP4, GEMM1, MX>, grid, block, 0, dependent, stream, p); break;
    default: launch_kernel(sm80_grouped_gemm<4, A_FP4, GEMM1, MX>, grid, block, 0, dependent, stream, p); break;
  }
}
// MX weights take bf16 activations only (Layer::prepare: W4A4 needs NVFP4 weights), so the
// NVFP4-activation launches compile no MX kernels.
template <bool A_FP4, bool GEMM1>
void launch(const Gemm80Config& c, const Params& p, bool dependent, cudaStream_t stream) {
  if (p.w.block != 32) {
    launch<A_FP4, GEMM1, false>(c, p, dependent, stream);
  } else if constexpr (!A_FP4) {
    launch<A_FP4, GEMM1, true>(c, p, dependent, stream);
  } else {
    detail::fail(ErrorKind::unsupported, "fast path: weights: got MXFP4 with NVFP4 activations, need NVFP4 weights");
  }
}
// The launches with NVFP4 activations (W4A4), each GEMM's in a file of its own
// (gemm_sm80_gemm1_fp4a.cu, gemm_sm80_gemm2_fp4a.cu), so that no file of the fast path compiles
// more than 8 of its kernels.
void launch_gemm1_fp4a(const Gemm80Config& c, const Params& p, bool dependent, cudaStream_t stream);
void launch_gemm2_fp4a(const Gemm80Config& c, const Params& p, bool dependent, cudaStream_t stream);

// FP4MOE_LOG=1: each config once per shape.
inline void log_choice(const char* which, const Gemm80Problem& pb, const Gemm80Config& c) {
  if (!gemm_log_on()) return;
  char line[512];
  std::snprintf(line, sizeof line, "%s sm80 rows_bound=%lld E=%lld N=%d K=%d -> token_tile %d, grid %lldx%lld (%s)",
                which, (long long)pb.rows_bound, (long long)pb.num_experts, pb.N, pb.K, c.token_tile,
                (long long)c.grid_x, (long long)c.grid_y, c.why.c_str());
  gemm_log(line);
}

inline Params base_params(const WeightMatrix& w, const ExpertRows& rows, const uint16_t* a_bf16, const uint8_t* a_fp4,
                          const uint8_t* a_scale, float a_dq, int64_t tiles) {
  Params p{};
  p.w = w;
  p.rows = rows;
  p.a_bf16 = a_bf16;
  p.a_fp4 = a_fp4;
  p.a_scale = a_scale;
  p.a_mult = a_fp4 ? a_dq * exp2i(kNvfp4Fold) : a_dq;
  p.tiles = tiles;
  // FP4MOE_SM80_INSIDE_MIN_KB (A/B): the untested loads only where K has at least that many
  // k-blocks (default 0: wherever K is a whole number of them).
  p.inside_min_kb = env_int("FP4MOE_SM80_INSIDE_MIN_KB", 0);
  return p;
}

}  // namespace fp4moe::cuda::sm80
