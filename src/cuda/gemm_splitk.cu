// The split-K decode path of the grouped GEMMs (FP4MOE_GEMM=splitk; sm_80 and later).
// Measured on the H200 (bench/results/2026-11-30-notes.md): the same time as the fast path
// at 1-512 tokens (kimi-k2) with ~5x its CTAs, so it is not a default; kept for comparison.
//
// Why: at decode (1-8 rows per expert) the fast path has one CTA per (expert, 128-row
// tile), too few CTAs and too few bytes in flight to stream the weights at HBM speed
// (bench/results/2026-11-29-notes.md). Here K is also split across CTAs:
//   grid (ceil(N / 128) row tiles, (expert, token tile) slots, splits)
// and each CTA streams one K slice of its 128-row x 8-token tile with a 4-stage cp.async
// pipeline of BK = 128 (8 KiB of weights per stage). No L2 cache-policy hint on cp.async:
// ptxas 13.x miscompiles cp.async with a fractional createpolicy (illegal instruction seen
// on the H200, 2026-11-29; a known ptxas bug, fixed in later releases). Up to 4 CTAs per SM keep about 96 KiB of
// weights in flight per SM.
//
// The MMA and the in-register dequantization are those of gemm_sm80_kernel.cuh, shared through
// gemm_sm80_core.cuh (swap-AB, mma.m16n8k16, weights decoded to bf16 exactly with the
// folded block scale); the
// fragment layout is gemm_internal.hpp's. Deterministic: each CTA writes its raw fp32
// sums to partials [split][row][device row n]; a second kernel adds the splits in split
// order and applies the epilogue of the fast path (GEMM 1: global scale, bias,
// activation, bf16 rounding, NVFP4 requantization; GEMM 2: global scale, bias, fp32 y).
// No atomics.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"

namespace fp4moe::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlocksPerCta = kSplitKRowTile / kFragRows;   // 8 fragment rows: 2 per warp
constexpr int kTok = kSplitKTokenTile;                       // 8 tokens: one n8 MMA tile
constexpr int kSB = kSplitKStageBlocks;                      // fragment blocks of K per stage
constexpr int kStageWeightBytes = kBlocksPerCta * kSB * kFragWords * 4;  // 8 KiB
static_assert(kSplitKRowTile == kWarps * 2 * kFragRows, "each warp owns two m16 tiles");

}  // namespace

SplitKConfig choose_splitk_config(const SplitKProblem& p) {
  SplitKConfig c;
  c.grid_x = (p.N + kSplitKRowTile - 1) / kSplitKRowTile;
  // sum_e ceil(count_e / 8) <= rows_bound / 8 + E, and <= rows_bound (a tile has a row).
  c.tiles = std::min<int64_t>((p.rows_bound + kTok - 1) / kTok + p.num_experts, p.rows_bound);
  c.grid_y = std::min<int64_t>(c.tiles, 65535);
  c.kb_total = (p.K + kFragK - 1) / kFragK;
  c.kb_per_split = c.kb_total;
  if (p.rows_bound <= 0 || c.kb_total <= 0 || c.grid_x <= 0) {
    c.why = "no work";
    return c;
  }
  const int64_t active = std::max<int64_t>(1, std::min(p.num_experts, p.rows_bound));
  const int64_t per_expert = (p.rows_bound + active - 1) / active;
  if (per_expert > kTok) {
    c.why = "more than 8 rows per active expert: the fast path's larger token tiles reuse weights better";
    return c;
  }
  const int64_t sms = std::max(1, p.num_sms);
  const int64_t pairs = c.grid_x * c.tiles;
  const int64_t target = sms * kSplitKCtasPerSm * kSplitKTargetWaves;
  int64_t want = (target + pairs - 1) / pairs;
  want = std::min<int64_t>({want, kSplitKMaxSplits, std::max(1, c.kb_total / kSplitKMinBlocks)});
  if (want < 2) {
    c.why = "enough CTAs without splitting K (or K too short to split)";
    return c;
  }
  c.kb_per_split = int((c.kb_total + want - 1) / want);
  c.splits = (c.kb_total + c.kb_per_split - 1) / c.kb_per_split;
  if (c.splits < 2) {
    c.kb_per_split = c.kb_total;
    c.splits = 1;
    c.why = "K too short to split";
    return c;
  }
  c.split = true;
  c.ctas = pairs * c.splits;
  // Resident CTAs per SM (at most what registers and shared memory allow) times the stages
  // one CTA keeps in flight while it computes on one.
  const int64_t resident = std::clamp<int64_t>(c.ctas / sms, 1, kSplitKCtasPerSm);
  const int64_t stages = std::min<int64_t>(kSplitKStages - 1, (c.kb_per_split + kSB - 1) / kSB);
  c.in_flight_per_sm = resident * stages * kStageWeightBytes;
  c.why = "decode: " + std::to_string(c.splits) + " splits of " + std::to_string(c.kb_per_split) +
          " x 64 k, " + std::to_string(c.ctas) + " CTAs";
  return c;
}

size_t splitk_gemm_partials_bytes(const SplitKConfig& c, int64_t row_space, int N) {
  if (!c.split) return 0;
  return size_t(c.splits) * size_t(std::max<int64_t>(row_space, 0)) * size_t(N) * sizeof(float);
}

namespace {

// One pipeline stage in shared memory, kSB fragment-block columns of K (k = 64 each):
//   weights  [b 8][c kSB][512 B]        fragment blocks of the CTA's 8 fragment rows
//   scales   [b 8][c kSB][64 B]         their folded scale codes (NVFP4 64 B, MX 32 B used)
//   A data   [c kSB][tok 8][128 B]      bf16, 16-byte chunks XOR-swizzled by token (ldmatrix)
//            [c kSB][tok 8][32 B]       or NVFP4 e2m1 pairs
//   A scales [c kSB][tok 8][4]          NVFP4 only: e4m3 per 16 k
template <bool A_FP4>
struct Stage {
  static constexpr int kWBytes = kStageWeightBytes;
  static constexpr int kSBytes = kBlocksPerCta * kSB * 64;
  static constexpr int kAColBytes = A_FP4 ? kTok * 32 : kTok * 128;
  static constexpr int kADataBytes = kSB * kAColBytes;
  static constexpr int kAScaleBytes = A_FP4 ? kSB * kTok * 4 : 0;
  static constexpr int kBytes = kWBytes + kSBytes + kADataBytes + kAScaleBytes;
  static constexpr int kSmem = kSplitKStages * kBytes;
  static_assert(kSmem <= 45 * 1024, "the pipeline must fit the 48 KiB of static shared memory with the row tables");
  static_assert(kSplitKCtasPerSm * (kSmem + 2048) <= 200 * 1024,
                "kSplitKCtasPerSm CTAs (with the 1 KiB each reserves) must fit in an sm_90 SM's shared memory");
  static_assert(kBytes % 16 == 0 && kWBytes % 16 == 0 && kSBytes % 16 == 0 && kADataBytes % 16 == 0,
                "cp.async destinations must stay 16-byte aligned");
  static_assert(kTok <= kThreads, "one thread per token row fills the row tables");
};

struct PartialParams {
  WeightMatrix w;
  ExpertRows rows;
  const uint16_t* a_bf16;
  const uint8_t* a_fp4;
  const uint8_t* a_scale;
  const int32_t* a_gather;
  int64_t tiles;
  int kb_per_split;
  bool a_kperm;     // A is k-permuted in rows of Kp (GEMM 2's h), else logical (GEMM 1's x)
  float* partials;  // [splits][row_space][N] raw fp32 sums (no scale, no bias)
};

struct ReduceParams {
  WeightMatrix w;
  ExpertRows rows;
  int64_t tiles;
  int splits;
  const float* partials;
  float a_mult;  // a_dq, times 2^8 for NVFP4 A (decoded as e2m1 * e4m3 * 2^-8)
  // GEMM 1
  Activation act;
  float alpha, limit;
  uint16_t* h_bf16;
  uint8_t* h_fp4;
  uint8_t* h_scale;
  float h_gs;
  // GEMM 2
  float* y;
};

// Partial sums of one K slice (blockIdx.z) for 128 weight rows (blockIdx.x) x 8 tokens.
template <bool A_FP4>
__global__ void __launch_bounds__(kThreads, kSplitKCtasPerSm) splitk_partial_gemm(const PartialParams p) {
  using S = Stage<A_FP4>;
  __shared__ __align__(128) uint8_t smem[S::kSmem];
  __shared__ int s_expert, s_tile;
  __shared__ int64_t s_arow[kTok];  // A row of token j, -1 past the expert's rows
  __shared__ int64_t s_orow[kTok];  // output row of token j, -1 past the expert's rows

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows, K = w.K;
  const int nb0 = blockIdx.x * kBlocksPerCta;
  const bool mx = w.block == 32;
  const int sb = frag_scale_bytes(w.block);
  const int s_off = sm80::scale_word_offset(g, t, sb), s_byte = sm80::scale_word_byte(t, mx);
  const int a_row = p.a_kperm ? w.Kp : K;  // A's row length (gemm_internal.hpp kperm_row)
  const int kb_begin = int(blockIdx.z) * p.kb_per_split;
  const int kb_end = min(KB, kb_begin + p.kb_per_split);
  const int n_stages = max(0, (kb_end - kb_begin + kSB - 1) / kSB);
  float* part = p.partials + int64_t(blockIdx.z) * p.rows.row_space * w.N;

  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    const int e = sm80::enter_slot<kTok>(slot, warp, lane, p.rows.begin, p.rows.count, w.num_experts, p.a_gather,
                                         &s_expert, &s_tile, s_arow, s_orow);
    if (e < 0) return;  // past the real work; later slots are too

    // Stage `stage` <- fragment-block columns kb_begin + s * kSB + [0, kSB), those < kb_end.
    auto load_stage = [&](int stage, int s) {
      uint8_t* st = smem + stage * S::kBytes;
      const int kbs = kb_begin + s * kSB;
      // 512 16-byte chunks (gemm_internal.hpp frag_block: the CTA's 8 fragment rows of one
      // k-block are adjacent in memory).
      for (int c = threadIdx.x; c < kBlocksPerCta * kSB * 32; c += kThreads) {
        const int b = c / (kSB * 32), kc = (c / 32) % kSB, l = c % 32, nb = nb0 + b, kb = kbs + kc;
        if (nb < NB && kb < kb_end)
          ptx::cp_async_16(st + (b * kSB + kc) * (kFragWords * 4) + l * 16,
                           w.q + frag_block(e, nb, kb, w.groups, KB) * kFragWords + l * 4, true);
      }
      const int cpb = sb / 16;  // 16-byte chunks of scales per fragment block (4 or 2)
      if (threadIdx.x < kBlocksPerCta * kSB * cpb) {
        const int blk = threadIdx.x / cpb, part16 = threadIdx.x % cpb;
        const int b = blk / kSB, kc = blk % kSB, nb = nb0 + b, kb = kbs + kc;
        if (nb < NB && kb < kb_end)
          ptx::cp_async_16(st + S::kWBytes + blk * 64 + part16 * 16,
                           w.scale + frag_block(e, nb, kb, w.groups, KB) * sb + part16 * 16, true);
      }
      uint8_t* sa = st + S::kWBytes + S::kSBytes;
      if constexpr (!A_FP4) {
        for (int c = threadIdx.x; c < kSB * kTok * 8; c += kThreads) {
          const int kc = c / (kTok * 8), j = (c / 8) % kTok, ch = c % 8, k = (kbs + kc) * kFragK + ch * 8;
          const int64_t row = s_arow[j];
          const bool valid = row >= 0 && k < a_row && kbs + kc < kb_end;
          ptx::cp_async_16(sa + kc * S::kAColBytes + j * 128 + sm80::a_bf16_swizzle(j, ch),
                           valid ? p.a_bf16 + row * a_row + k : p.a_bf16, valid);
        }
      } else {
        for (int c = threadIdx.x; c < kSB * kTok * 4; c += kThreads) {
          const int kc = c / (kTok * 4), j = (c / 4) % kTok, ch = c % 4, k = (kbs + kc) * kFragK + ch * 16;
          const int64_t row = s_arow[j];
          const bool valid = row >= 0 && k < a_row && kbs + kc < kb_end;
          ptx::cp_async_8(sa + kc * S::kAColBytes + j * 32 + ch * 8,
                          valid ? p.a_fp4 + row * (a_row / 2) + k / 2 : p.a_fp4, valid);
          // scale rows (K/16 bytes, logical blocks) need not be 4-byte aligned: plain loads, seen
          // after the barrier; a block past K (h's padding) scales by 0
          sa[S::kADataBytes + kc * kTok * 4 + j * 4 + ch] =
              valid && k < K ? p.a_scale[row * (K / 16) + k / 16] : uint8_t(0);
        }
      }
    };

    float acc[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mt][c] = 0.0f;

#pragma unroll
    for (int s = 0; s < kSplitKStages - 1; ++s) {
      if (s < n_stages) load_stage(s, s);
      ptx::cp_async_commit_group();
    }
    for (int it = 0; it < n_stages; ++it) {
      ptx::cp_async_wait_group<kSplitKStages - 2>();
      __syncthreads();  // stage it visible to all; stage it-1 fully consumed by all warps
      if (it + kSplitKStages - 1 < n_stages) load_stage((it + kSplitKStages - 1) % kSplitKStages, it + kSplitKStages - 1);
      ptx::cp_async_commit_group();

      const uint8_t* st = smem + (it % kSplitKStages) * S::kBytes;
#pragma unroll
      for (int kc = 0; kc < kSB; ++kc) {
        if (kb_begin + it * kSB + kc >= kb_end) break;  // the slice's last stage may be short
        const uint8_t* sa = st + S::kWBytes + S::kSBytes + kc * S::kAColBytes;
        const uint8_t* sas = st + S::kWBytes + S::kSBytes + S::kADataBytes + kc * kTok * 4;
        uint4 wq[2];
        uint32_t sp[2];  // the rows' scale pair, once for the block's four k-steps (kperm)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const int blk = (2 * warp + mt) * kSB + kc;
          uint32_t ws;
          sm80::load_weight_frag(st + blk * (kFragWords * 4), st + S::kWBytes + blk * 64, lane, s_off, wq[mt], ws);
          sp[mt] = sm80::scale_rows_bf16x2(ws, s_byte, mx);
        }
#pragma unroll
        for (int kp = 0; kp < 2; ++kp) {  // k-steps 2kp, 2kp+1
          uint32_t bfrag[4];              // b0, b1 of k-step 2kp, then of 2kp+1
          if constexpr (!A_FP4) {
            if (!p.a_kperm) {  // logical x: lane t's logical k 16t + 8kp .. + 7 of token g
              const uint4 v = *reinterpret_cast<const uint4*>(sa + g * 128 + sm80::a_bf16_swizzle(g, 2 * t + kp));
              bfrag[0] = v.x, bfrag[1] = v.y, bfrag[2] = v.z, bfrag[3] = v.w;
            } else {
              const int j = lane % 8, ch = kp * 4 + lane / 8;
              ptx::ldmatrix_x4(bfrag, sa + j * 128 + sm80::a_bf16_swizzle(j, ch));
            }
          } else {
            // every k-step of lane t is in block t (kperm); logical x: bytes 8t + 2kk, + 1
            const uint32_t sc = sm80::e4m3_scale_bf16x2(sas[g * 4 + t]);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int kk = 2 * kp + h;
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                const uint32_t x = sa[g * 32 + (p.a_kperm ? kk * 8 + half * 4 + t : 8 * t + 2 * kk + half)];
                bfrag[2 * h + half] = ptx::mul_bf16x2(ptx::e2m1x2_top_nibbles_to_bf16x2((x << 12) | (x << 24)), sc);
              }
            }
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int kk = 2 * kp + h;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              uint32_t a[4];
              sm80::weight_a_frag(a, wq[mt], sp[mt], kk);
              ptx::mma_m16n8k16_bf16(acc[mt], a, bfrag[2 * h], bfrag[2 * h + 1]);
            }
          }
        }
      }
    }
    ptx::cp_async_wait_group<0>();

    // acc[mt]: device rows (nb0 + 2 warp + mt) * 16 + g (c0, c1) and + 8 (c2, c3); tokens 2t, 2t+1.
    const int nbw = nb0 + 2 * warp;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      if (nbw + mt >= NB) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int n = (nbw + mt) * kFragRows + g + 8 * half;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t r = s_orow[2 * t + c];
          if (r >= 0) part[r * w.N + n] = acc[mt][2 * half + c];
        }
      }
    }
    __syncthreads();  // the row tables and stages are reused by the next slot
  }
}

// GEMM 1 epilogue: one thread per (token j of the slot's tile, 16 consecutive i = one NVFP4
// block of h); x = blockIdx.x * 128 + threadIdx.x = j * ceil(I / 16) + block.
__global__ void __launch_bounds__(kThreads) splitk_reduce_gemm1(const ReduceParams p) {
  __shared__ int s_expert, s_tile;
  const WeightMatrix& w = p.w;
  const int I = w.N / 2, nblk = (I + 15) / 16;
  const int64_t Ir = kperm_row(I);  // h is k-permuted (gemm_internal.hpp kperm_index)
  const int x = int(blockIdx.x) * kThreads + int(threadIdx.x);
  const int blk = x % nblk, j = x / nblk;
  const int64_t plane = p.rows.row_space * w.N;
  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    if (threadIdx.x < 32)
      sm80::find_slot<kTok>(slot, p.rows.count, w.num_experts, int(threadIdx.x), &s_expert, &s_tile);
    __syncthreads();
    const int e = s_expert, row_in_expert = s_tile * kTok + j;
    __syncthreads();  // read by all before warp 0 writes the next slot's
    if (e < 0) return;
    if (j >= kTok || row_in_expert >= p.rows.count[e]) continue;
    const int64_t r = int64_t(p.rows.begin[e]) + row_in_expert;
    const float mult = w.epi[e] * p.a_mult;
    float hv[16];
#pragma unroll
    for (int grp = 0; grp < 2; ++grp) {
      const int i0 = blk * 16 + grp * 8;
      if (i0 >= I) {  // I % 16 == 8: the last block has one group of 8 (bf16 h only)
#pragma unroll
        for (int q = 0; q < 8; ++q) hv[grp * 8 + q] = 0.0f;
        continue;
      }
      // Device rows (i0 / 8) * 16 + [0, 8) are gate i0.., + [8, 16) up i0.. (w13_device_row).
      float gs[8], us[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) gs[q] = us[q] = 0.0f;
      for (int s = 0; s < p.splits; ++s) {
        const float4* src = reinterpret_cast<const float4*>(p.partials + s * plane + r * w.N + (i0 / 8) * 16);
        const float4 g0 = src[0], g1 = src[1], u0 = src[2], u1 = src[3];
        gs[0] += g0.x, gs[1] += g0.y, gs[2] += g0.z, gs[3] += g0.w;
        gs[4] += g1.x, gs[5] += g1.y, gs[6] += g1.z, gs[7] += g1.w;
        us[0] += u0.x, us[1] += u0.y, us[2] += u0.z, us[3] += u0.w;
        us[4] += u1.x, us[5] += u1.y, us[6] += u1.z, us[7] += u1.w;
      }
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int i = i0 + q;
        const float bg = w.bias ? w.bias[int64_t(e) * w.N + i] : 0.0f;
        const float bu = w.bias ? w.bias[int64_t(e) * w.N + I + i] : 0.0f;
        const float gv = gs[q] * mult + bg, uv = us[q] * mult + bu;
        hv[grp * 8 + q] = round_bf16(gemm1_activation(gv, uv, p.act, p.alpha, p.limit));
        if (p.h_bf16) p.h_bf16[r * Ir + kperm_index(i)] = bf16_from_f32(hv[grp * 8 + q]);
      }
    }
    if (blk == nblk - 1 && p.h_bf16)  // the row's zero padding, I .. Ir
      for (int i = I; i < Ir; ++i) p.h_bf16[r * Ir + kperm_index(i)] = 0;
    if (p.h_fp4) {  // W4A4 layers have I % 16 == 0: the block is whole
      float amax = 0.0f;
#pragma unroll
      for (int q = 0; q < 16; ++q) amax = fmaxf(amax, fabsf(hv[q]));
      const uint8_t sc = nvfp4_scale_code(amax, p.h_gs);
      const float inv = nvfp4_inv_scale(sc, p.h_gs);
#pragma unroll
      for (int q = 0; q < 8; ++q)
        p.h_fp4[r * (Ir / 2) + kperm_index(blk * 16 + 2 * q) / 2] =
            pack_e2m1(e2m1_from_f32(hv[2 * q] * inv), e2m1_from_f32(hv[2 * q + 1] * inv));
      p.h_scale[r * (I / 16) + blk] = sc;
      if (blk == nblk - 1)
        for (int i = I; i < Ir; i += 2) p.h_fp4[r * (Ir / 2) + kperm_index(i) / 2] = 0;
    }
  }
}

// GEMM 2 epilogue: one thread per output column n, the tile's tokens one after another.
__global__ void __launch_bounds__(kThreads) splitk_reduce_gemm2(const ReduceParams p) {
  __shared__ int s_expert, s_tile;
  const WeightMatrix& w = p.w;
  const int n = int(blockIdx.x) * kThreads + int(threadIdx.x);
  const int64_t plane = p.rows.row_space * w.N;
  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    if (threadIdx.x < 32)
      sm80::find_slot<kTok>(slot, p.rows.count, w.num_experts, int(threadIdx.x), &s_expert, &s_tile);
    __syncthreads();
    const int e = s_expert, tile = s_tile;
    __syncthreads();  // read by all before warp 0 writes the next slot's
    if (e < 0) return;
    if (n >= w.N) continue;
    const float mult = w.epi[e] * p.a_mult;
    const float b = w.bias ? w.bias[int64_t(e) * w.N + n] : 0.0f;
    const int rows = min(kTok, p.rows.count[e] - tile * kTok);
    for (int j = 0; j < rows; ++j) {
      const int64_t r = int64_t(p.rows.begin[e]) + tile * kTok + j;
      float acc = 0.0f;
      for (int s = 0; s < p.splits; ++s) acc += p.partials[s * plane + r * w.N + n];
      p.y[r * w.N + n] = acc * mult + b;
    }
  }
}

// The kernels read little through L1 (cp.async.cg bypasses it): ask for the largest shared
// memory carveout so that kSplitKCtasPerSm CTAs fit. Once per kernel and device.
template <class Kernel>
void prefer_shared(Kernel* k, std::atomic<uint64_t>& done, int device) {
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit && (done.load(std::memory_order_relaxed) & bit)) return;
  FP4MOE_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k),
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         int(cudaSharedmemCarveoutMaxShared)));
  done.fetch_or(bit, std::memory_order_relaxed);
}

// FP4MOE_LOG=1: each config once per shape.
void log_choice(const char* which, const SplitKProblem& pb, const SplitKConfig& c) {
  if (!gemm_log_on()) return;
  char line[512];
  std::snprintf(line, sizeof line,
                "%s splitk rows_bound=%lld E=%lld N=%d K=%d SMs=%d -> %s, grid %lldx%lldx%d, %lld KiB in flight per "
                "SM (%s)",
                which, (long long)pb.rows_bound, (long long)pb.num_experts, pb.N, pb.K, pb.num_sms,
                c.split ? "split" : "fast path", (long long)c.grid_x, (long long)c.grid_y, c.splits,
                (long long)(c.in_flight_per_sm / 1024), c.why.c_str());
  gemm_log(line);
}

// Config of one GEMM, or !split; checks the caller's partials when it splits.
SplitKConfig plan(const char* which, const CudaWeights& cw, const WeightMatrix& w, const ExpertRows& rows,
                  const float* partials, size_t partials_bytes) {
  const SplitKProblem pb{rows.rows_bound, w.num_experts, w.N, w.K, multiprocessor_count(cw.device)};
  SplitKConfig c = choose_splitk_config(pb);
  log_choice(which, pb, c);
  if (!c.split || !partials) {
    c.split = false;
    return c;
  }
  const size_t need = splitk_gemm_partials_bytes(c, rows.row_space, w.N);
  const std::string f = which;
  if (partials_bytes < need)
    detail::fail_arg(f + ": partials_bytes: got " + std::to_string(partials_bytes) + ", need >= " +
                     std::to_string(need) + " (splitk_partials_bytes)");
  if (reinterpret_cast<uintptr_t>(partials) % 16)
    detail::fail_arg(f + ": partials: got an address not 16-byte aligned, need 16-byte alignment");
  return c;
}

template <bool A_FP4>
void launch_partial(const SplitKConfig& c, const PartialParams& p, int device, cudaStream_t stream) {
  static std::atomic<uint64_t> done{0};
  prefer_shared(&splitk_partial_gemm<A_FP4>, done, device);
  const dim3 grid(unsigned(c.grid_x), unsigned(c.grid_y), unsigned(c.splits));
  splitk_partial_gemm<A_FP4><<<grid, kThreads, 0, stream>>>(p);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

PartialParams partial_params(const WeightMatrix& w, const ExpertRows& rows, const uint16_t* a_bf16,
                             const uint8_t* a_fp4, const uint8_t* a_scale, const int32_t* a_gather,
                             const SplitKConfig& c, float* partials) {
  PartialParams p{};
  p.w = w;
  p.rows = rows;
  p.a_bf16 = a_bf16;
  p.a_fp4 = a_fp4;
  p.a_scale = a_scale;
  p.a_gather = a_gather;
  p.tiles = c.tiles;
  p.kb_per_split = c.kb_per_split;
  p.partials = partials;
  return p;
}

ReduceParams reduce_params(const WeightMatrix& w, const ExpertRows& rows, const SplitKConfig& c,
                           const float* partials, bool a_fp4, float a_dq) {
  ReduceParams r{};
  r.w = w;
  r.rows = rows;
  r.tiles = c.tiles;
  r.splits = c.splits;
  r.partials = partials;
  r.a_mult = a_fp4 ? a_dq * exp2i(kNvfp4Fold) : a_dq;
  return r;
}

}  // namespace

size_t splitk_partials_bytes(const DeviceWeights& dw, int64_t rows_bound, int64_t row_space) {
  const auto& cw = static_cast<const CudaWeights&>(dw);
  if (rows_bound <= 0) return 0;
  const int sms = multiprocessor_count(cw.device);
  size_t bytes = 0;
  for (const WeightMatrix* w : {&cw.w13, &cw.w2}) {
    const SplitKConfig c = choose_splitk_config({rows_bound, w->num_experts, w->N, w->K, sms});
    bytes = std::max(bytes, splitk_gemm_partials_bytes(c, row_space, w->N));
  }
  return bytes;
}

bool splitk_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  const SplitKConfig c = plan("gemm1", cw, cw.w13, a.rows, a.partials, a.partials_bytes);
  if (!c.split || c.grid_y == 0) return false;
  PartialParams pp = partial_params(cw.w13, a.rows, a.a_bf16, a.a_fp4, a.a_scale, a.a_gather, c, a.partials);
  pp.a_kperm = false;  // x: logical
  if (a.a_fp4) launch_partial<true>(c, pp, cw.device, stream);
  else launch_partial<false>(c, pp, cw.device, stream);

  ReduceParams r = reduce_params(cw.w13, a.rows, c, a.partials, a.a_fp4 != nullptr, a.a_dq);
  r.act = cw.desc.activation;
  r.alpha = cw.desc.swiglu_alpha;
  r.limit = cw.desc.swiglu_limit;
  r.h_bf16 = a.h_bf16;
  r.h_fp4 = a.h_fp4;
  r.h_scale = a.h_scale;
  r.h_gs = a.h_gs;
  const int64_t threads = int64_t(kTok) * ((cw.w13.N / 2 + 15) / 16);
  const dim3 grid(unsigned((threads + kThreads - 1) / kThreads), unsigned(c.grid_y));
  splitk_reduce_gemm1<<<grid, kThreads, 0, stream>>>(r);
  FP4MOE_CUDA_CHECK_LAUNCH();
  return true;
}

bool splitk_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const SplitKConfig c = plan("gemm2", cw, cw.w2, a.rows, a.partials, a.partials_bytes);
  if (!c.split || c.grid_y == 0) return false;
  PartialParams pp = partial_params(cw.w2, a.rows, a.a_bf16, a.a_fp4, a.a_scale, nullptr, c, a.partials);
  pp.a_kperm = true;  // h: k-permuted
  if (a.a_fp4) launch_partial<true>(c, pp, cw.device, stream);
  else launch_partial<false>(c, pp, cw.device, stream);

  ReduceParams r = reduce_params(cw.w2, a.rows, c, a.partials, a.a_fp4 != nullptr, a.a_dq);
  r.y = a.y;
  const dim3 grid(unsigned((cw.w2.N + kThreads - 1) / kThreads), unsigned(c.grid_y));
  splitk_reduce_gemm2<<<grid, kThreads, 0, stream>>>(r);
  FP4MOE_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace fp4moe::cuda
