// The grouped GEMMs on Hopper warpgroup MMA (FP4MOE_GEMM=sm90; sm_90a only) for
// prefill-sized batches: at least 64 rows per active expert (kimi-k2 from T ~ 4096).
//
// Why: at many rows per expert the fast path (mma.sync, 32 tokens per CTA) re-reads every
// weight tile once per 32 tokens and issues one mma.sync per 16x8x16. Here a CTA covers 64 or
// 128 tokens, and one wgmma.mma_async instruction covers 64 weight rows x all of them.
//
// Swap-AB as in the fast path: weight rows are the MMA's M, tokens its N.
//   - CTA = 2 warpgroups (256 threads) = 256 weight rows (16 fragment rows) x kTok tokens
//     (kTok = 64 or 128, the wgmma N) of one expert. Warp wl of warpgroup wg owns fragment
//     rows fb = wg*8 + 2*wl (m-tile 0) and fb + 1 (m-tile 1): the wgmma D fragment then puts
//     them in its accumulators acc[mt][nt][c] in the fast path's layout (gate and up of 16 i
//     for GEMM 1), so the shared epilogues run unchanged with NT = kTok / 8.
//   - Both operands from shared memory (the SS form). Per 64-wide k-block all 256 threads
//     decode the stage's FP4 fragment blocks (the fast path's frag_decode_word and folded
//     scale multiply, exact) into a bf16 A tile [256 rows][64 k] in the 128-byte swizzle that
//     the wgmma descriptor names; each warpgroup then issues its 2 m-tiles x 4 k-steps = 8
//     wgmma as ONE commit group and waits only for the group before it (wait_group 1).
//     Why not A from registers (the RS form, what this kernel did first): the decoded A of a
//     wgmma must sit in registers until it completes, so only about one k16 wgmma (~64-128
//     tensor cycles) could be queued per warpgroup while the next fragment was decoded; the
//     decode's latency was exposed (measured on the H200: 28-35% of the bf16 peak, 5.9 cycles
//     per issued instruction). Here a whole k-block of MMAs (8 per warpgroup) runs while the
//     CTA decodes the next k-block into the other of two A tiles, and the accumulators are
//     the only registers wgmma holds.
//   - The decode writes whole 16-byte chunks: a thread takes the words of one k-step pair from
//     the 4 lanes (t = 0..3) of one row pair (g, g+8), which hold complete 8-k chunks of both
//     rows (see the kernel for the mapping and why it is bank-conflict free).
//   - B (activations): bf16 [tok][64 k] per k-block, 128-byte swizzle (the fast path's A-tile
//     XOR swizzle), rows gathered through a_gather with cp.async.
//   - Pipeline: kStages stages of {B tile, 16 fragment blocks, their scales} (25 KiB per stage
//     at 128 tokens, 17 KiB at 64), filled by all threads with cp.async kStages - 2 k-blocks
//     ahead (a stage is read by the wgmma group of its k-block until one k-block later), plus
//     the two 32 KiB A tiles: one CTA per SM (6 stages at 128 tokens, 9 at 64: 215 and 218
//     KiB). Each thread's cp.async sources are computed once per slot (per-k-block strides).
// W4A4 (NVFP4 activations in, NVFP4 h out) is staged through bf16 (gemm_internal.hpp,
// nvfp4_staging.cu): NVFP4 A is dequantized exactly into the scratch, these kernels run on it
// as on bf16 A, and GEMM 1's bf16 h is requantized as the fast path's epilogue would. Without
// the scratch (gemm_scratch_bytes) sm90_gemm1/2 return false and the caller runs the fast path.
//
// Work assignment as in the fast path: blockIdx.x = 256-row tile, blockIdx.y walks the
// (expert, token tile) slots found by a warp scan over count[]. No atomics: deterministic.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/common/ptx_sm90.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"

namespace fp4moe::cuda {

Sm90Config choose_sm90_config(const Sm90Problem& p) {
  Sm90Config c;
  c.grid_x = (p.N + kSm90RowTile - 1) / kSm90RowTile;
  if (p.rows_bound <= 0 || p.N <= 0) {
    c.why = "no work";
    return c;
  }
  const int64_t active = std::max<int64_t>(1, std::min(p.num_experts, p.rows_bound));
  const int64_t per_expert = (p.rows_bound + active - 1) / active;  // rows per active expert if spread evenly
  if (per_expert < kSm90MinRowsPerExpert) {
    c.why = "fewer than " + std::to_string(kSm90MinRowsPerExpert) +
            " rows per active expert: the fast path's smaller token tiles waste less";
    return c;
  }
  // 128-token tiles read each weight tile half as often as 64-token ones; but when an odd
  // number of 64-token tiles covers the average expert, 128 would pad a whole 64 more.
  const int64_t t64 = (per_expert + 63) / 64;
  c.token_tile = (t64 % 2 == 1 && per_expert <= 256) ? 64 : 128;
  c.use = true;
  // sum_e ceil(count_e / tile) <= rows_bound / tile + E, and <= rows_bound (a tile has a row).
  c.tiles = std::min<int64_t>((p.rows_bound + c.token_tile - 1) / c.token_tile + p.num_experts, p.rows_bound);
  c.grid_y = std::min<int64_t>(c.tiles, 65535);
  c.why = std::to_string(per_expert) + " rows per active expert: wgmma, " + std::to_string(c.token_tile) +
          " tokens per CTA";
  return c;
}

Sm90Staging sm90_staging(int64_t rows_bound, int64_t row_space, int64_t num_experts, int64_t H, int64_t I) {
  Sm90Staging st;
  // GEMM 1 (N = 2I, K = H) and GEMM 2 (N = H, K = I) decide alike: on the rows per expert.
  st.use = choose_sm90_config({rows_bound, num_experts, int(2 * I), int(H)}).use &&
           choose_sm90_config({rows_bound, num_experts, int(H), int(I)}).use;
  if (!st.use) return st;
  auto aligned = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t rows = size_t(std::max<int64_t>(row_space, 0));
  st.a_bf16 = 0;
  st.h_bf16 = aligned(rows * size_t(std::max(H, I)) * 2);
  st.bytes = st.h_bf16 + aligned(rows * size_t(I) * 2);
  return st;
}

namespace {

constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;
constexpr int kBlocksPerCta = kSm90RowTile / kFragRows;  // 16 fragment rows
constexpr int kMTileRows = 64;                           // the wgmma M
constexpr int kMTileBytes = kMTileRows * kFragK * 2;     // bf16 [64 rows][64 k]: 8 KiB
constexpr int kATileBytes = kSm90RowTile * kFragK * 2;   // bf16 [256 rows][64 k]: 32 KiB, 4 m-tiles
constexpr int kSwizzleAtom = 1024;                       // 8 rows of 128 B: where the 128-byte swizzle repeats
constexpr int kSmemPerCta = 227 * 1024;                  // the most one CTA may opt in to (H100/H200)
constexpr int kSmemPerSm = 228 * 1024;                   // H100/H200 shared memory per SM

// Dynamic shared memory, from its first 1024-byte boundary:
//   [A tile 0][A tile 1][stage 0] ... [stage kStages-1]
// A tile: bf16 [4 m-tiles][64 rows][64 k], K-major, 128-byte swizzle; m-tile wg * 2 + mt, row
//   16 * wl + r holds row r of fragment row wg * 8 + 2 * wl + mt (the rows whose D warp wl of
//   warpgroup wg holds, see the kernel).
// Stage: [B tile][16 fragment blocks][their scales]
//   B tile: bf16 [kTok][64 k], K-major, 128-byte swizzle (16-byte chunk ch of token j at chunk ch ^ j % 8)
//   block b (512 B): the 16-byte lane slots of gemm_internal.hpp's [lane 32][kk 4] words
//     transposed to [t 4][g 8] (slot of lane 4g + t at (8t + g) * 16), so the decode's reads
//     of one t from 8 g and two k-step pairs are conflict-free
//   scales: block b at b * 64, as gemm_internal.hpp lays them out ([g 8][c][half 2])
template <int NT>
struct Tile {
  static constexpr int kTok = 8 * NT;                             // tokens per CTA = the wgmma N
  static constexpr int kBBytes = kTok * 128;
  static constexpr int kWBytes = kBlocksPerCta * kFragWords * 4;  // 8 KiB
  static constexpr int kSBytes = kBlocksPerCta * 64;              // room for NVFP4's 64 B per block
  static constexpr int kStageBytes = kBBytes + kWBytes + kSBytes;
  static constexpr int kStaticSmem = 2 * kTok * 8 + 16;           // row tables, expert and tile
  // One CTA per SM (two A tiles and a pipeline deep enough to hide the loads do not fit twice
  // in 228 KiB), so the stages take all the shared memory the A tiles leave: 6 at 128 tokens,
  // 9 at 64.
  static constexpr int kStages = (kSmemPerCta - kStaticSmem - kSwizzleAtom - 2 * kATileBytes) / kStageBytes;
  // k-blocks loaded ahead. A stage is free again two k-blocks after its own: k-block kb's
  // wgmma group is waited for in iteration kb + 1 (see the main loop).
  static constexpr int kPrefetch = kStages - 2;
  static constexpr int kSmem = kSwizzleAtom + 2 * kATileBytes + kStages * kStageBytes;  // + slack to align the base
  static_assert(kStageBytes % kSwizzleAtom == 0 && kATileBytes % kSwizzleAtom == 0 && kMTileBytes % kSwizzleAtom == 0,
                "every A m-tile and B tile must start 1024-byte aligned: the 128-byte swizzle repeats every 8 rows");
  static_assert(kSmem + kStaticSmem <= kSmemPerCta, "one CTA's shared memory must fit the opt-in limit");
  static_assert((kTok * 8) % kThreads == 0, "the B tile's 16-byte chunks must divide evenly over the threads");
  static_assert((kBlocksPerCta * 32) % kThreads == 0, "the weight chunks must divide evenly over the threads");
  static_assert(kBlocksPerCta * 64 / 16 <= kThreads, "one thread per 16-byte scale chunk");
  static_assert(kTok <= kThreads, "one thread per token row fills the row tables");
  static_assert(kPrefetch >= 3, "keep at least three k-blocks of loads in flight");
  static_assert(2 * (2 * kATileBytes + (3 + 2) * kStageBytes) > kSmemPerSm,
                "one CTA per SM is a choice only while two CTAs with three k-blocks in flight do not fit");
};
// The decode gives each thread one fragment row, row pair (g, g + 8) and k-step pair.
static_assert(kBlocksPerCta * 8 * 2 == kThreads, "one thread per (fragment row, g, k-step pair)");

struct Params {
  WeightMatrix w;
  ExpertRows rows;
  const uint16_t* a_bf16;
  const int32_t* a_gather;
  float a_mult;  // a_dq
  int64_t tiles;
  sm80::Epilogue epi;
};

template <int NT, bool GEMM1>
__global__ void __launch_bounds__(kThreads, 1) sm90_grouped_gemm(const Params p) {
#if defined(FP4MOE_SM90A)
  using T = Tile<NT>;
  constexpr int kTok = T::kTok;
  constexpr int kStages = T::kStages, kPrefetch = T::kPrefetch;
  extern __shared__ uint8_t smem_raw[];
  __shared__ int s_expert, s_tile;
  __shared__ int64_t s_arow[kTok];  // A row of token j, -1 past the expert's rows
  __shared__ int64_t s_orow[kTok];  // output row of token j, -1 past the expert's rows

  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t pad = (kSwizzleAtom - (raw % kSwizzleAtom)) % kSwizzleAtom;
  uint8_t* const a_tiles = smem_raw + pad;
  uint8_t* const stages = a_tiles + 2 * kATileBytes;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = lane % 4;
  const int g = lane / 4;
  // The warpgroup through a shuffle: the compiler then knows it is warp-uniform and keeps the
  // wgmma descriptors built from it in uniform registers.
  const int wg = __shfl_sync(0xFFFFFFFFu, warp / 4, 0), wl = warp % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows, K = w.K;
  const int nb0 = blockIdx.x * kBlocksPerCta;
  const int fb = wg * 8 + 2 * wl;  // the warp's fragment rows in the CTA: fb (m-tile 0), fb + 1 (m-tile 1)
  const bool mx = w.block == 32;
  const int sb = frag_scale_bytes(w.block);

  // ---- decode role: what this thread turns from e2m1 into the A tile, per k-block ----
  // Lanes 0-15 decode the warp's fragment row fb, lanes 16-31 fb + 1 (the rows its own
  // m-tiles read); lane dg + 8 dh does rows dg and dg + 8, k-steps 2dh and 2dh + 1, i.e. the
  // words (k-steps 2dh, 2dh + 1) of the four lane slots 4dg + t, t = 0..3, which together
  // hold whole 16-byte chunks 4dh..4dh+3 of both rows: eight 16-byte stores per k-block.
  // Reads: per t, 16 lanes read 8 bytes each of one contiguous 128 B ([t][g] slots), no
  // conflict; stores: the 8 lanes of one store phase (dg = 0..7) hit chunks c ^ dg, 8 different
  // bank groups.
  const int dmt = lane / 16, dg = lane % 8, dh = (lane / 8) % 2;
  const bool d_ok = nb0 + fb + dmt < NB;  // fragment rows past N: zero weights (the stage holds stale bytes there)
  const int d_frag = T::kBBytes + (fb + dmt) * (kFragWords * 4) + dg * 16 + dh * 8;  // + t * 128 for lane slot 4dg + t
  // The scale bytes of rows dg, dg + 8 of k-steps 2dh, 2dh + 1 in one aligned word: NVFP4
  // [c 4][half 2] from c = 2dh (bytes 2i + half for k-step 2dh + i); MX [c 2][half 2] from
  // c = 0 (column dh at bytes 2dh + half for both k-steps).
  const int d_scale = T::kBBytes + T::kWBytes + (fb + dmt) * 64 + dg * (sb / 8) + (mx ? 0 : 4 * dh);
  const int d_sbyte[2] = {mx ? 2 * dh : 0, mx ? 2 * dh : 2};  // row dg's byte for k-step 2dh + i
  // Row dg of the A tile place of fragment row fb + dmt (row dg + 8 is 8 rows = 1024 B on);
  // chunk 4dh + j sits at chunk (4dh + j) ^ dg = d_x ^ j.
  const int d_row = (wg * 2 + dmt) * kMTileBytes + (16 * wl + dg) * 128;
  const int d_x = (4 * dh) ^ dg;

  auto decode = [&](const uint8_t* st, uint8_t* a_tile) {
    uint2 q[4];  // [t]: words of k-steps 2dh (x), 2dh + 1 (y) of lane slot 4dg + t
    uint32_t sw = 0u;
#pragma unroll
    for (int tt = 0; tt < 4; ++tt)
      q[tt] = d_ok ? *reinterpret_cast<const uint2*>(st + d_frag + tt * 128) : make_uint2(0u, 0u);
    if (d_ok) sw = *reinterpret_cast<const uint32_t*>(st + d_scale);
#pragma unroll
    for (int i = 0; i < 2; ++i) {  // k-step 2dh + i: chunks 4dh + 2i (k 0-7 of it), 4dh + 2i + 1 (k 8-15)
      const uint32_t s_g = sm80::scale_pair_bf16x2(sw, d_sbyte[i], mx);
      const uint32_t s_g8 = sm80::scale_pair_bf16x2(sw, d_sbyte[i] + 1, mx);
      uint32_t v[4][4];  // [t][j]: weight_a_frag's a_j of lane slot 4dg + t
#pragma unroll
      for (int tt = 0; tt < 4; ++tt) frag_decode_word(i == 0 ? q[tt].x : q[tt].y, v[tt]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // a_j: row dg (j even) or dg + 8, k 2t.. (j < 2) or 8 + 2t..
        const uint32_t s = j % 2 == 0 ? s_g : s_g8;
        const uint4 chunk = make_uint4(ptx::mul_bf16x2(v[0][j], s), ptx::mul_bf16x2(v[1][j], s),
                                       ptx::mul_bf16x2(v[2][j], s), ptx::mul_bf16x2(v[3][j], s));
        *reinterpret_cast<uint4*>(a_tile + d_row + (j % 2) * kSwizzleAtom + (d_x ^ (2 * i + j / 2)) * 16) = chunk;
      }
    }
  };

  // wgmma descriptors: A m-tile wg * 2 + mt of A tile 0, B tile of stage 0. The start address
  // field (bits 0-13, address >> 4) never carries into the next field (shared addresses
  // < 2^18), so other tiles, stages and k-steps add (byte offset >> 4) to the descriptor.
  const uint32_t a_tiles_addr = raw + pad;
  const uint64_t desc_a = ptx::wgmma_desc_kmajor_sw128(a_tiles_addr + uint32_t(wg * 2 * kMTileBytes));
  const uint64_t desc_b = ptx::wgmma_desc_kmajor_sw128(a_tiles_addr + uint32_t(2 * kATileBytes));

  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    const int e = sm80::enter_slot<kTok>(slot, warp, lane, p.rows.begin, p.rows.count, w.num_experts, p.a_gather,
                                         &s_expert, &s_tile, s_arow, s_orow);
    if (e < 0) return;  // past the real work; later slots are too

    // ---- the loads: each thread's cp.async sources are fixed for the slot up to a per-k-block
    // stride, so they are computed here once ----
    // B: chunk cb (k 8cb..8cb+7, + 64 kb) of tokens jb + 32i; zeros past the expert's rows and past K.
    constexpr int kBChunks = kTok * 8 / kThreads;
    const int jb = threadIdx.x / 8, cb = threadIdx.x % 8;
    const int b_dst = jb * 128 + sm80::a_bf16_swizzle(jb, cb);  // (jb + 32i) % 8 = jb % 8: + i * 32 * 128
    // b_src[i]: the chunk of k-block 0 of token jb + 32i's row (row 0's past the expert's rows,
    // so that every source address is in bounds; bit i of b_rows says whether it is real).
    const uint8_t* b_src[kBChunks];
    uint32_t b_rows = 0;
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      const int64_t row = s_arow[jb + 32 * i];
      b_src[i] = reinterpret_cast<const uint8_t*>(p.a_bf16 + max(row, int64_t(0)) * K + cb * 8);
      b_rows |= row >= 0 ? 1u << i : 0u;
    }
    // Weights: lane slot c % 32 of fragment row c / 32, c = threadIdx.x + i * kThreads, as a
    // byte offset in the expert's blocks (+ 512 kb), ~0u past N.
    constexpr int kWChunks = kBlocksPerCta * 32 / kThreads;
    const uint8_t* expert_q = reinterpret_cast<const uint8_t*>(w.q) + int64_t(e) * NB * KB * (kFragWords * 4);
    uint32_t w_src[kWChunks];
    int w_dst[kWChunks];
#pragma unroll
    for (int i = 0; i < kWChunks; ++i) {
      const int c = threadIdx.x + i * kThreads, b = c / 32, slot_l = c % 32;
      w_src[i] = nb0 + b < NB ? uint32_t(nb0 + b) * uint32_t(KB) * uint32_t(kFragWords * 4) + uint32_t(slot_l) * 16u
                              : ~0u;
      w_dst[i] = T::kBBytes + b * (kFragWords * 4) + ((slot_l % 4) * 8 + slot_l / 4) * 16;  // [t][g]
    }
    // Scales: 16-byte part s_part of fragment row s_b's scales (+ sb kb), the first 16 * sb / 16 threads.
    const int s_b = threadIdx.x / (sb / 16), s_part = threadIdx.x % (sb / 16);
    const bool s_on = s_b < kBlocksPerCta && nb0 + s_b < NB;
    const uint8_t* s_src = w.scale + ((int64_t(e) * NB + nb0 + s_b) * KB) * sb + s_part * 16;
    const int s_dst = T::kBBytes + T::kWBytes + s_b * 64 + s_part * 16;

    auto load_stage = [&](int stage, int kb) {
      uint8_t* st = stages + stage * T::kStageBytes;
      // Past K: k-block 0's chunk as the (unread) source, zeros written.
      const bool k_ok = kb * kFragK + cb * 8 < K;
      const int b_off = k_ok ? kb * (kFragK * 2) : 0;
#pragma unroll
      for (int i = 0; i < kBChunks; ++i)
        ptx::cp_async_16(st + b_dst + i * 32 * 128, b_src[i] + b_off, k_ok && (b_rows >> i) % 2 != 0);
#pragma unroll
      for (int i = 0; i < kWChunks; ++i)
        if (w_src[i] != ~0u) ptx::cp_async_16(st + w_dst[i], expert_q + w_src[i] + kb * (kFragWords * 4), true);
      if (s_on) ptx::cp_async_16(st + s_dst, s_src + kb * sb, true);
    };

    // acc[mt][nt][c]: m-tile mt (fragment row fb + mt), tokens nt*8 + 2t + c%2, rows g (c < 2), g+8
    float acc[2][NT][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[mt][nt][c] = 0.0f;
          ptx::reg_fence(acc[mt][nt][c]);  // zeroed before the first wgmma_fence
        }

#pragma unroll
    for (int s = 0; s < kPrefetch; ++s) {
      if (s < KB) load_stage(s, s);
      ptx::cp_async_commit_group();
    }
    // The main loop. Iteration kb, every thread:
    //   wait for its copies of k-block kb; barrier X_kb; loads of k-block kb + kPrefetch;
    //   decode stage kb into A tile kb % 2; fence.proxy.async; barrier Y_kb;
    //   (per warpgroup) 8 wgmma = one group G_kb (A tile kb % 2, B of stage kb); wait_group 1.
    // So G_kb runs while the CTA decodes k-block kb + 1 into the other A tile. Why no buffer
    // is rewritten while a wgmma in flight reads it:
    //  - wait_group 1 in iteration kb returns once G_(kb-1) is complete, so every thread passing
    //    X_(kb+1) proves G_(kb-1) complete in both warpgroups.
    //  - A tile kb % 2 is next written by the decode of kb + 2, after X_(kb+2), hence after G_kb
    //    (its only reader) completed; its writes of kb are fenced to the async proxy and
    //    barriered (Y_kb) before G_kb is issued.
    //  - Stage kb % kStages is next filled with k-block kb + kStages = kb + kPrefetch + 2,
    //    issued after X_(kb+2): G_kb (B tile) complete, the decode of kb (weights, scales)
    //    behind Y_kb. Its cp.async data of kb landed (each thread's wait) before X_kb, and was
    //    fenced to the async proxy with the A writes before Y_kb.
    //  - The accumulators are written by wgmma only until wait_group 0 after the loop.
    int rd = 0, ld = kPrefetch;  // stages of k-blocks kb and kb + kPrefetch
    for (int kb = 0; kb < KB; ++kb) {
      // Committed so far: kPrefetch + kb groups, the one of k-block kb the (kb + 1)-th.
      ptx::cp_async_wait_group<kPrefetch - 1>();
      __syncthreads();  // X_kb
      if (kb + kPrefetch < KB) load_stage(ld, kb + kPrefetch);
      ptx::cp_async_commit_group();

      const int buf = kb % 2;
      decode(stages + rd * T::kStageBytes, a_tiles + buf * kATileBytes);
      ptx::fence_proxy_async_shared();  // the A tile's st.shared and the stage's cp.async data -> wgmma
      __syncthreads();                  // Y_kb

      const uint64_t da = desc_a + uint32_t(buf * kATileBytes) / 16;
      const uint64_t db = desc_b + uint32_t(rd * T::kStageBytes) / 16;
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)  // k-step kk: bytes 32kk..32kk+31 of every row (the hardware swizzles the full address)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          ptx::wgmma_m64k16_bf16_ss<NT>(acc[mt], da + (mt * kMTileBytes + 32 * kk) / 16, db + (32 * kk) / 16);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<1>();  // G_(kb-1) is done
      rd = rd + 1 == kStages ? 0 : rd + 1;
      ld = ld + 1 == kStages ? 0 : ld + 1;
    }
    ptx::wgmma_wait_group<0>();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) ptx::reg_fence(acc[mt][nt][c]);  // read only after the wait
    ptx::cp_async_wait_group<0>();

    // ---- epilogue: the fast path's, on the warp's fragment rows nbw, nbw + 1 ----
    const int nbw = nb0 + fb;  // even
    if (nbw < NB) {            // NB is even for GEMM 1, so both m-tiles are real there
      const float mult = w.epi[e] * p.a_mult;
      // Read from shared memory at each use: held in registers, 2 * NT row indices (int64)
      // would sit next to the 4 * NT accumulators of each m-tile.
      const volatile int64_t* orow = s_orow;
      auto out_row = [&](int nt, int c) -> int64_t { return orow[nt * 8 + 2 * t + c]; };
      if constexpr (GEMM1) {
        sm80::Epilogue ep = p.epi;
        ep.h_fp4 = nullptr;  // NVFP4 h: requantized from the bf16 h by a second kernel (staging)
        sm80::epilogue_gemm1<NT>(ep, w, e, nbw, g, mult, acc, out_row);
      } else {
        sm80::epilogue_gemm2<NT>(p.epi, w, e, nbw, g, mult, acc, out_row);
      }
    }
    __syncthreads();  // the row tables, A tiles and stages are reused by the next slot
  }
#endif  // FP4MOE_SM90A
}

std::atomic<int64_t> g_launches{0};

// The listed instantiations: token tile {64, 128} x {GEMM 1, GEMM 2}.
template <bool GEMM1>
void launch(const Sm90Config& c, const Params& p, cudaStream_t stream) {
  const dim3 grid(unsigned(c.grid_x), unsigned(c.grid_y));
  if (c.token_tile == 64) sm90_grouped_gemm<8, GEMM1><<<grid, kThreads, Tile<8>::kSmem, stream>>>(p);
  else sm90_grouped_gemm<16, GEMM1><<<grid, kThreads, Tile<16>::kSmem, stream>>>(p);
  FP4MOE_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

// "" when every sm90 kernel has sm_90a code for `device` (and may use its shared memory),
// else why not. Checked once per device; sets the kernels' dynamic shared memory limit.
template <class Kernel>
std::string prepare_kernel(Kernel kernel, int smem, const char* name) {
  cudaFuncAttributes attr{};
  if (cudaError_t err = cudaFuncGetAttributes(&attr, kernel); err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string(name) + ": cudaFuncGetAttributes: " + cudaGetErrorString(err);
  }
  if (attr.binaryVersion != 90)
    return std::string(name) + ": the device runs its sm_" + std::to_string(attr.binaryVersion) +
           " code, which has no wgmma body";
  if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string(name) + ": cudaFuncSetAttribute(" + std::to_string(smem) + " B): " + cudaGetErrorString(err);
  }
  return "";
}

std::string check_device(int device) {
  const int cc = compute_capability(device);
  if (cc != 90) return "device " + std::to_string(device) + " is sm_" + std::to_string(cc) + ", wgmma needs sm_90";
  if (std::string(compiled_archs()).find("sm_90a") == std::string::npos)
    return std::string("this build has no sm_90a code (compiled: ") + compiled_archs() + ")";
  DeviceGuard guard(device);
  for (const std::string& why :
       {prepare_kernel(sm90_grouped_gemm<8, true>, Tile<8>::kSmem, "gemm1 tile 64"),
        prepare_kernel(sm90_grouped_gemm<16, true>, Tile<16>::kSmem, "gemm1 tile 128"),
        prepare_kernel(sm90_grouped_gemm<8, false>, Tile<8>::kSmem, "gemm2 tile 64"),
        prepare_kernel(sm90_grouped_gemm<16, false>, Tile<16>::kSmem, "gemm2 tile 128")})
    if (!why.empty()) return why;
  return "";
}

// FP4MOE_LOG=1: print each choice once per shape.
void log_choice(const char* which, const Sm90Problem& pb, const Sm90Config& c, bool staged,
                const std::string& refused) {
  if (!gemm_log_on()) return;
  const bool runs = c.use && refused.empty();
  char line[768];
  std::snprintf(line, sizeof line, "%s sm90 rows_bound=%lld E=%lld N=%d K=%d%s -> %s%s (%s%s%s)", which,
                (long long)pb.rows_bound, (long long)pb.num_experts, pb.N, pb.K, staged ? " NVFP4" : "",
                runs ? (c.token_tile == 64 ? "wgmma, 64 tokens" : "wgmma, 128 tokens") : "fast path",
                runs && staged ? " via bf16 staging" : "", c.why.c_str(), refused.empty() ? "" : "; ",
                refused.c_str());
  gemm_log(line);
}

// The config of one GEMM, or use = false (the caller runs the fast path). staged: NVFP4
// operands, which need the staging scratch; staging_refused says why they cannot have it ("": they can).
Sm90Config plan(const char* which, const CudaWeights& cw, const WeightMatrix& w, const ExpertRows& rows,
                bool staged, const std::string& staging_refused) {
  const Sm90Problem pb{rows.rows_bound, w.num_experts, w.N, w.K};
  Sm90Config c = choose_sm90_config(pb);
  std::string refused;
  if (c.use) {
    refused = why_no_sm90(cw.device);
    if (refused.empty() && staged) refused = staging_refused;
  }
  log_choice(which, pb, c, staged, refused);
  if (!refused.empty()) c.use = false;
  return c;
}

bool misaligned(const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to != 0; }

// "" when the staging of one GEMM can run: the scratch is there and large enough, the staged
// rows can be addressed in it, and the outputs are aligned for the staging kernels' vector
// accesses. Else why not (the GEMM then runs the fast path).
std::string staging_refusal(const Sm90Staging& st, const float* scratch, size_t scratch_bytes, int64_t num_experts) {
  if (!st.use) return "";  // choose_sm90_config declines too
  if (!scratch || scratch_bytes < st.bytes)
    return "NVFP4 activations are staged through bf16: the scratch has " + std::to_string(scratch ? scratch_bytes : 0) +
           " bytes, needs " + std::to_string(st.bytes) + " (gemm_scratch_bytes)";
  if (misaligned(scratch, 16)) return "the staging scratch is not 16-byte aligned";
  if (num_experts > kStageMaxExperts)
    return "more than " + std::to_string(kStageMaxExperts) + " experts for the staging kernels";
  return "";
}

Params base_params(const Sm90Config& c, const WeightMatrix& w, const ExpertRows& rows, const uint16_t* a_bf16,
                   float a_dq) {
  Params p{};
  p.w = w;
  p.rows = rows;
  p.a_bf16 = a_bf16;
  p.a_mult = a_dq;
  p.tiles = c.tiles;
  return p;
}

}  // namespace

std::string why_no_sm90(int device) {
  static std::mutex mu;
  static std::map<int, std::string> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(device);
  if (it == known.end()) it = known.emplace(device, check_device(device)).first;
  return it->second;
}

int64_t sm90_launches() { return g_launches.load(std::memory_order_relaxed); }

// GEMM 1. NVFP4 A: dequantized into the scratch (a_bf16), rows [0, a_rows) through a_gather,
// else the experts' rows; NVFP4 h: the kernel writes bf16 h (the caller's h_bf16 if given,
// else the scratch's h_bf16), then it is requantized into h_fp4 / h_scale.
bool sm90_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  const int64_t H = cw.w13.K, I = cw.w13.N / 2, E = cw.w13.num_experts;
  const bool staged = a.a_fp4 != nullptr || a.h_fp4 != nullptr;
  const Sm90Staging st = sm90_staging(a.rows.rows_bound, a.rows.row_space, E, H, I);
  std::string refused;
  if (staged) {
    refused = staging_refusal(st, a.partials, a.partials_bytes, E);
    if (refused.empty() && a.a_fp4 && a.a_gather && (a.a_rows <= 0 || a.a_rows > a.rows.row_space))
      refused = "NVFP4 A through a_gather: a_rows " + std::to_string(a.a_rows) + " is not in [1, row_space " +
                std::to_string(a.rows.row_space) + "]";
    if (refused.empty() && a.h_fp4 && (misaligned(a.h_fp4, 4) || (a.h_bf16 && misaligned(a.h_bf16, 16))))
      refused = "h_fp4 not 4-byte or h_bf16 not 16-byte aligned for the requantization";
  }
  const Sm90Config c = plan("gemm1", cw, cw.w13, a.rows, staged, refused);
  if (!c.use) return false;
  const uint16_t* A = a.a_bf16;
  uint16_t* h = a.h_bf16;
  uint8_t* scratch = reinterpret_cast<uint8_t*>(a.partials);
  if (a.a_fp4) {
    uint16_t* a_bf16 = reinterpret_cast<uint16_t*>(scratch + st.a_bf16);
    stage_nvfp4_to_bf16(a.a_fp4, a.a_scale, H, a.rows, E, a.a_gather ? a.a_rows : 0, a_bf16, stream);
    A = a_bf16;
  }
  if (a.h_fp4 && !h) h = reinterpret_cast<uint16_t*>(scratch + st.h_bf16);
  Params p = base_params(c, cw.w13, a.rows, A, a.a_dq);
  p.a_gather = a.a_gather;
  p.epi.act = cw.desc.activation;
  p.epi.alpha = cw.desc.swiglu_alpha;
  p.epi.limit = cw.desc.swiglu_limit;
  p.epi.h_bf16 = h;
  launch<true>(c, p, stream);
  if (a.h_fp4) stage_bf16_to_nvfp4(h, I, a.rows, E, a.h_gs, a.h_fp4, a.h_scale, stream);
  return true;
}

// GEMM 2. NVFP4 A (h): the experts' rows dequantized into the scratch (a_bf16) first.
bool sm90_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const int64_t H = cw.w2.N, I = cw.w2.K, E = cw.w2.num_experts;
  const bool staged = a.a_fp4 != nullptr;
  const Sm90Staging st = sm90_staging(a.rows.rows_bound, a.rows.row_space, E, H, I);
  const std::string refused = staged ? staging_refusal(st, a.partials, a.partials_bytes, E) : "";
  const Sm90Config c = plan("gemm2", cw, cw.w2, a.rows, staged, refused);
  if (!c.use) return false;
  const uint16_t* A = a.a_bf16;
  if (a.a_fp4) {
    uint16_t* a_bf16 = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(a.partials) + st.a_bf16);
    stage_nvfp4_to_bf16(a.a_fp4, a.a_scale, I, a.rows, E, 0, a_bf16, stream);
    A = a_bf16;
  }
  Params p = base_params(c, cw.w2, a.rows, A, a.a_dq);
  p.epi.y = a.y;
  launch<false>(c, p, stream);
  return true;
}

}  // namespace fp4moe::cuda
