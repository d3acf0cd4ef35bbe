// The grouped GEMMs at the smallest decode sizes (at most 8 rows per active expert, and too
// few row tiles to fill the SMs): the weights streamed through registers, warp by warp, with
// K split inside a CTA (sm_80 and later; the default path's choice for these shapes,
// FP4MOE_GEMM=decode forces it where it splits).
//
// Why: at T = 1 a layer touches a handful of experts, and the fast path's 128-row tiles
// (gemm_sm80_kernel.cuh) leave most SMs with ~7 warps: too few to keep the HBM busy (ncu, kimi-k2
// T = 1: 7 of 64 warps per SM, 51% issue slots busy). Here:
//   - a warp owns 32 weight rows (two m16 fragment rows: for GEMM 1 gate and up of 16 i,
//     one NVFP4 block of h) of one (expert, 8-token tile) and a contiguous K slice; each lane
//     loads its 16 bytes of the two fragment blocks and its 8 scale bytes of every k-block
//     straight into registers, two k-blocks ahead (coalesced 512-byte warp loads), so
//     nothing goes through shared memory and no barrier runs in the k loop;
//   - the tokens are the MMA's N (swap-AB, mma.m16n8k16): each lane loads its B-fragment
//     words straight from the bf16 activation rows (L1-resident at decode), one k-block
//     ahead (NVFP4 activations arrive staged to bf16, gemm_dispatch.cpp);
//   - the weights are decoded to bf16 in registers exactly as in the fast path
//     (gemm_sm80_core.cuh weight_a_frag: folded block scale, exact);
//   - a CTA is `splits` warps on the same 32 rows, each on its own K slice, as many as fit the
//     CTAs in the fewest whole waves (choose_decode_config); the slices' fp32 sums are added
//     through shared memory by warp 0 in slice order (fixed by the shape: deterministic), which
//     then runs the fast path's epilogue (bias, activation, bf16 rounding, NVFP4 requantization).
//   - the k loop spends its instructions on the decode and the MMAs: the sources are pointers
//     moved on by constants, full k-blocks run two per iteration with no branch or test per
//     load, and the one K ends in runs after them (SASS per two k-blocks, NVFP4 GEMM 1: 439 ->
//     311; on the H200, kimi-k2 W4A16 T = 1: 93.3 -> 83.9 us, GEMM 1 56.0 -> 49.1 us, GEMM 2
//     31.8 -> 28.4 us; notes v8).
// Measured on the H200 (kimi-k2 W4A16, notes of 2026-11-30): T = 1 111 us vs 117 on the fast
// path; where K would not split (T >= 8) it ran 2-5% slower than the fast path, so it declines.
// Work assignment as in the fast path: blockIdx.x = row pair, blockIdx.y walks the (expert,
// token tile) slots found by a warp scan over count[]. No atomics. One token (GEMM 1 at T = 1
// as the permute's programmatic dependent, Gemm1Args::one_token): blockIdx.y walks the k top-k
// slots, each's expert from the top-k ids, so its weights stream while the permute runs.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/common/env.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"
#include "cuda/local_expert.cuh"

namespace fp4moe::cuda {

DecodeConfig choose_decode_config(const DecodeProblem& p, int forced_splits, int edge) {
  DecodeConfig c;
  if (p.rows_bound <= 0 || p.N <= 0 || p.K <= 0) {
    c.why = "no work";
    return c;
  }
  const int64_t active = std::max<int64_t>(1, std::min(p.num_experts, p.rows_bound));
  const int64_t per_expert = (p.rows_bound + active - 1) / active;  // rows per active expert if spread evenly
  if (per_expert > kDecodeTokenTile) {
    c.why = "more than " + std::to_string(kDecodeTokenTile) + " rows per active expert: the tiled paths reuse weights";
    return c;
  }
  c.grid_x = (p.N / kFragRows + 1) / 2;
  // sum_e ceil(count_e / tile) <= rows_bound / tile + E, and <= rows_bound (a tile has a row).
  c.tiles = std::min<int64_t>((p.rows_bound + kDecodeTokenTile - 1) / kDecodeTokenTile + p.num_experts, p.rows_bound);
  c.grid_y = std::min<int64_t>(c.tiles, 65535);
  // Whether K splits: where the row units (about one slot per active expert) leave the SMs
  // short of warps, under kDecodeWarpsPerSm / edge each (kDecodeEdge, or kDecodeEdgeAfterDecode
  // for a GEMM 2 after a GEMM 1 on these kernels), and K holds two slices of
  // kDecodeMinKbPerSplit k-blocks. Elsewhere the fast path's tiles run (unsplit, this kernel
  // measured 2-5% slower).
  const int kb_total = (p.K + kFragK - 1) / kFragK;
  const int64_t units = c.grid_x * std::min<int64_t>(c.tiles, active);
  const int64_t sms = std::max(1, p.num_sms);
  const int64_t warps_wanted_per_unit = sms * kDecodeWarpsPerSm / std::max<int64_t>(units, 1);
  c.kb_per_split = kb_total;
  if (warps_wanted_per_unit < edge || kb_total / kDecodeMinKbPerSplit < 2) {
    c.why = "enough row tiles to fill the SMs unsplit: the fast path's tiles";
    return c;
  }
  // The split: by whole waves of resident CTAs. A CTA of s warps is resident
  // kDecodeResidentWarps / s per SM; a wave of them takes about kDecodeWaveCost + ceil(kb_total /
  // s) k-blocks of one warp's stream (a warp's own stream rate bounds the kernel, not the SMs'
  // warp count: notes v7 §3). Least waves x that; the fewest slices on a tie. Slice counts that
  // leave a slice empty are the same split as a smaller count, and skipped.
  // FP4MOE_DECODE_WAVE_COST (A/B): another wave cost; 0 the v37 rule (slices until 50 warps per
  // SM, at most 8, none under 4 k-blocks).
  static const int wave_cost = env_int("FP4MOE_DECODE_WAVE_COST", kDecodeWaveCost);
  int splits = 2;
  if (wave_cost <= 0) {
    splits = int(std::clamp<int64_t>(warps_wanted_per_unit, 1, 8));
    splits = std::max(2, std::min(splits, kb_total / kDecodeMinKbPerSplit));
  } else {
    int64_t best = INT64_MAX;
    for (int s = 2; s <= std::min(kDecodeMaxSplits, kb_total); ++s) {
      const int kbs = (kb_total + s - 1) / s;
      if ((kb_total + kbs - 1) / kbs != s) continue;
      const int64_t resident = sms * (kDecodeResidentWarps / s);
      const int64_t cost = (units + resident - 1) / resident * (wave_cost + kbs);
      if (cost < best) best = cost, splits = s;
    }
  }
  if (forced_splits > 0) splits = std::clamp(forced_splits, 2, std::min(kDecodeMaxSplits, kb_total));
  c.kb_per_split = (kb_total + splits - 1) / splits;
  c.splits = (kb_total + c.kb_per_split - 1) / c.kb_per_split;
  c.use = true;
  c.why = "decode: " + std::to_string(per_expert) + " rows per active expert, " + std::to_string(units) +
          " warps' worth of rows, K in " + std::to_string(c.splits) + " slices of " + std::to_string(c.kb_per_split) +
          " k-blocks" + (forced_splits > 0 ? " (slices forced: FP4MOE_DECODE_SPLITS or set_decode_splits)" : "");
  return c;
}

namespace {

// Two k-blocks of weights in flight per warp. Measured on the H200 (kimi-k2 T = 1): 2 at 96
// registers 118 us, 4 at 128 registers (fewer warps) 123 us. 80 registers (24 warps per SM)
// with kDecodeWarpsPerSm 50 against 96 (20) with 40, W4A16 T = 1 (notes v9, v10): kimi-k2
// 82.2 -> 81.2 us, deepseek-v3 79.3 -> 78.4, qwen3-235b 48.0 -> 45.9, gpt-oss-120b 44.4 ->
// 36.2, qwen3-30b 27.6 -> 24.3; qwen3-235b W4A4 55.6 -> 53.9. 72 registers (28 warps; targets
// 50, 56, 64) was 1-4% slower than 80 on the four presets measured: it spills in the k loop.
// At 80, the GEMM 1 kernels that search their slot spill outside the k loop (ptxas, since the
// slot search loads 8 counts a lane: 4 bytes NVFP4, 12 MXFP4); the one-token and GEMM 2
// kernels do not.
constexpr int kMaxRegs = 80;
static_assert(kDecodeResidentWarps == 4 * (16384 / (kMaxRegs * 32)), "the split's residency (gemm_internal.hpp)");

struct Params {
  WeightMatrix w;
  ExpertRows rows;
  const uint16_t* a_bf16;
  const int32_t* a_gather;
  float a_mult;  // a_dq
  int64_t tiles;
  int kb_per_split;
  sm80::Epilogue epi;
  // GEMM 1 of one token (the ONE kernels: Gemm1Args::one_token): slot j < k is top-k slot j,
  // its expert local_expert(one_ids[j]), its one row one_slot_row[j].
  const int32_t* one_ids;
  const int32_t* one_map;
  int64_t one_num_experts;
  const int32_t* one_slot_row;
};

// One lane's B fragments of one k-block: b[nt][2kk], b[nt][2kk+1] are the mma's b0, b1 of
// k-step kk for token nt * 8 + g (MMA positions 16kk + 2t + {0, 1} and + 8: logical k
// 16t + 4kk + {0, 1} and {2, 3}, gemm_internal.hpp kperm).
template <int NT>
struct BFrag {
  uint32_t b[NT][8];
};

// bf16 A of one k-block, from `row` (the row's words at that k-block, plus the lane's offset).
// GEMM 1's x is logical: lane t's 8 words are words 8t .. 8t + 7, two 16-byte loads through the
// read-only path; TAIL: the k-block K ends in, whose first k is k0: a lane whose block starts at
// or past K reads zeros (K % 16 == 0). GEMM 2's h is k-permuted (rows kperm_row(K) long, zeros
// past K, so no tail): its words 8kk + 4h + t. h is written by the grid this one may run beside
// (a programmatic dependent): the compiler moves read-only loads above grid_dependency_wait
// (seen in the SASS), so h takes plain coherent loads.
template <int NT, bool TAIL, bool GEMM1>
__device__ __forceinline__ void load_b_bf16(BFrag<NT>& f, const uint32_t* const (&row)[NT], int k0, int K, int t) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if constexpr (GEMM1) {
      const uint4* src = reinterpret_cast<const uint4*>(row[nt]);
      const bool on = !TAIL || k0 + 16 * t < K;
      const uint4 lo = on ? __ldg(src) : make_uint4(0u, 0u, 0u, 0u);
      const uint4 hi = on ? __ldg(src + 1) : make_uint4(0u, 0u, 0u, 0u);
      f.b[nt][0] = lo.x, f.b[nt][1] = lo.y, f.b[nt][2] = lo.z, f.b[nt][3] = lo.w;
      f.b[nt][4] = hi.x, f.b[nt][5] = hi.y, f.b[nt][6] = hi.z, f.b[nt][7] = hi.w;
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int h = 0; h < 2; ++h) f.b[nt][2 * kk + h] = row[nt][kk * 8 + h * 4];  // words of two bf16
    }
  }
}

// ONE (GEMM 1 only): one token, a CTA per top-k slot, its expert from the layer's inputs (the
// top-k ids, complete before the kernel before this one started), so that its first weights are
// in flight before it waits for the permute's row; it lets GEMM 2 start after that wait.
template <int NT, bool MX, bool GEMM1, bool ONE = false>
__global__ void __maxnreg__(kMaxRegs) decode_grouped_gemm(const Params p) {
  static_assert(!ONE || GEMM1, "one token: GEMM 1 only");
  constexpr int kTok = 8 * NT;
  constexpr int kAccPerLane = 2 * NT * 4;
  __shared__ int s_expert, s_tile;
  __shared__ int64_t s_arow[kTok];  // A row of token j, -1 past the expert's rows
  __shared__ int64_t s_orow[kTok];  // output row of token j, -1 past the expert's rows
  // slices 1.. for warp 0 to add: [slice - 1][kAccPerLane][32 lanes] (dynamic: none when one slice)
  extern __shared__ float s_part[];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows, K = w.K;
  const int nb = 2 * blockIdx.x;  // the CTA's fragment rows nb, nb + 1
  const int sb = frag_scale_bytes(MX ? 32 : 16);
  const int s_byte = sm80::scale_word_byte(t, MX);
  const uint32_t decode_low = sm80::decode_table(w);
  const int kb0 = warp * p.kb_per_split, kb1 = min(KB, kb0 + p.kb_per_split);
  // GEMM 1 as a programmatic dependent (decode_pdl): the rows, A and its gather are written by
  // the kernels before it, so it waits first. Then GEMM 2, launched as this grid's dependent,
  // may take the SMs this grid leaves once all its CTAs have passed here (so the rows are
  // complete: Gemm2Args::rows_settled): it streams its first weights while this grid's last
  // CTAs finish. Both immediate when launched normally.
  if constexpr (GEMM1 && !ONE) {
    ptx::grid_dependency_wait();
    ptx::grid_dependency_trigger();
  }

  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    int e;
    if constexpr (ONE) {
      e = local_expert(p.one_ids[slot], p.one_map, p.one_num_experts, w.num_experts);
      if (e < 0) {  // a slot of no local expert: no row; GEMM 2 may start once this CTA has waited
        ptx::grid_dependency_wait();
        ptx::grid_dependency_trigger();
        continue;
      }
    } else {
      e = sm80::enter_slot<kTok>(slot, warp, lane, p.rows.begin, p.rows.count, w.num_experts, p.a_gather, &s_expert,
                                 &s_tile, s_arow, s_orow);
      if (e < 0) {  // past the real work; later slots are too
        // GEMM 2 as a dependent: a grid that ends without waiting could complete before GEMM 1
        // does, and its own dependent's wait would then not cover GEMM 1
        if constexpr (!GEMM1) ptx::grid_dependency_wait();
        return;
      }
    }

    // The lane's sources at k-block kb0: per fragment row its 16 bytes of the k-block and its 8
    // (NVFP4) or 4 (MX) scale bytes (rows g, g+8); per token its activation row, or token 0's row
    // past the expert's rows (a tile has at least one row; those columns are computed, never
    // written). A fragment row past N (NB odd: only GEMM 2, whose epilogue skips it) reads row
    // NB - 1 again: its sums are never written, so it needs no zeros and no test per load.
    // Each k-block below adds a constant to these pointers (immediate offsets): kFragGroup blocks
    // (gemm_internal.hpp frag_block; the pair's two blocks of a k-block are side by side).
    const uint4* wp[2];
    const uint8_t* sp[2];  // the lane's scale word (rows g, g+8 of column t: kperm)
    // (nb is even: the pair's rows are one group's, side by side.)
    const int64_t blk0 = frag_block(e, nb, kb0, w.groups, KB);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const int64_t blk = blk0 + (mt == 1 && nb + 1 < NB ? 1 : 0);
      wp[mt] = reinterpret_cast<const uint4*>(w.q + blk * kFragWords) + lane;
      sp[mt] = w.scale + blk * sb + sm80::scale_word_offset(g, t, sb);
    }
    uint4 wq[2][2];  // [stage][m-tile]
    uint32_t ws[2][2];
    constexpr int kWStep = kFragGroup * kFragWords / 4;  // uint4 per k-block of one fragment row
    constexpr int kSStep = kFragGroup;                    // scale blocks (sb bytes) likewise
    // k-block kb0 + o (o: a constant) of the weights into stage d.
    auto load_w = [&](int d, int o) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        wq[d][mt] = __ldcs(wp[mt] + o * kWStep);
        ws[d][mt] = __ldcs(reinterpret_cast<const uint32_t*>(sp[mt] + o * kSStep * sb));
      }
    };
    if constexpr (ONE) {
      // the first two k-blocks in flight, then the permute's row of this slot (after the wait;
      // every local expert's slot has one), for every warp after the barrier
      load_w(0, 0);
      if (kb0 + 1 < kb1) load_w(1, 1);
      ptx::grid_dependency_wait();
      ptx::grid_dependency_trigger();
      if (threadIdx.x < kTok) {
        const int64_t r = threadIdx.x == 0 ? int64_t(p.one_slot_row[slot]) : -1;
        s_orow[threadIdx.x] = r;
        s_arow[threadIdx.x] = r < 0 ? -1 : p.a_gather ? int64_t(p.a_gather[r]) : r;
      }
      __syncthreads();
      if (s_arow[0] < 0) {  // no row (the permute places every local expert's slot): no work
        __syncthreads();  // before the next slot's row tables
        continue;
      }
    }
    const uint32_t* bp[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int64_t r0 = s_arow[nt * 8 + g];
      // x logical (lane t: words 8t ..), h k-permuted in rows of Kp (lane t: words t, 4 + t, ..)
      bp[nt] = reinterpret_cast<const uint32_t*>(p.a_bf16 + (r0 >= 0 ? r0 : s_arow[0]) * (GEMM1 ? K : w.Kp)) +
               kb0 * (kFragK / 2) + (GEMM1 ? 8 * t : t);
    }
    BFrag<NT> bf[2];
    constexpr int kBStep = kFragK / 2;  // words of two bf16 per activation row and k-block
    // k-block kb0 + o of the activations.
    auto load_b = [&](BFrag<NT>& f, int o, bool tail, int kb) {
      const uint32_t* row[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) row[nt] = bp[nt] + o * kBStep;
      if (tail) load_b_bf16<NT, true, GEMM1>(f, row, kb * kFragK, K, t);
      else load_b_bf16<NT, false, GEMM1>(f, row, 0, K, t);
    };
    // The pointers, moved on by n k-blocks.
    auto advance = [&](int n) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        wp[mt] += n * kWStep;
        sp[mt] += n * kSStep * sb;
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) bp[nt] += n * kBStep;
    };

    float acc[2][NT][4];
    sm80::zero_acc<NT>(acc);

    // k-block k (at offset o from the pointers) from stage d and B buffer d: the MMAs; then
    // stage d takes k-block k + 2 (k + 2 < kb1: a predicate, no branch). The B of k + 1 is
    // loaded by the caller.
    auto compute = [&](int d, int o, int k) {
      const BFrag<NT>& b = bf[d];
      uint32_t s[2];  // the rows' scale pairs, once for the four k-steps (kperm)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) s[mt] = sm80::scale_rows_bf16x2(ws[d][mt], s_byte, MX);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          uint32_t a[4];
          sm80::weight_a_frag<sm80::kMmaSyncHighByF16>(a, wq[d][mt], s[mt], kk, decode_low);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) ptx::mma_m16n8k16_bf16(acc[mt][nt], a, b.b[nt][2 * kk], b.b[nt][2 * kk + 1]);
        }
      if (k + 2 < kb1) load_w(d, o + 2);
    };

    // Register pipeline: stage d holds k-blocks kb0 + d (mod 2); B alternates two buffers
    // alike. Full k-blocks ([kb0, kbf)) run two per iteration with no branch inside; the one
    // K ends in (K % 64 != 0: only the last slice) after them, with its B zeroed past K.
    const int kbf = min(kb1, K / kFragK);
    if constexpr (!ONE) {
      load_w(0, 0);
      if (kb0 + 1 < kb1) load_w(1, 1);
    }
    // GEMM 2 as a programmatic dependent (decode_gemm2): everything above (the rows, the
    // weights) was complete before the grid before it let this one start (rows_settled); h is
    // not until it completes. Immediate when launched normally, and after the first slot.
    if constexpr (!GEMM1) ptx::grid_dependency_wait();
    if (kb0 < kbf) load_b(bf[0], 0, false, kb0);
    int k = kb0;
    for (; k + 2 <= kbf; k += 2) {
      load_b(bf[1], 1, false, k + 1);
      compute(0, 0, k);
      if (k + 2 < kbf) load_b(bf[0], 2, false, k + 2);
      compute(1, 1, k + 1);
      advance(2);
    }
    // At most one full k-block, then at most the tail one.
    int d = 0;
    if (k < kbf) {
      compute(0, 0, k);
      advance(1);
      ++k;
      d = 1;
    }
    if (k < kb1) {
      if (d == 0) {
        load_b(bf[0], 0, true, k);
        compute(0, 0, k);
      } else {
        load_b(bf[1], 0, true, k);
        compute(1, 0, k);
      }
    }

    // GEMM 2's dependent (the combine, which waits for this grid to complete) may launch once
    // every CTA is past its k loop.
    if constexpr (!GEMM1) ptx::grid_dependency_trigger();

    // ---- the slices' sums, added by warp 0 in slice order; then its epilogue ----
    float (&flat)[kAccPerLane] = reinterpret_cast<float (&)[kAccPerLane]>(acc);  // acc's floats in order
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < kAccPerLane; ++i) s_part[((warp - 1) * kAccPerLane + i) * 32 + lane] = flat[i];
    }
    __syncthreads();
    if (warp == 0 && nb < NB) {
      for (int s = 1; s < int(blockDim.x / 32); ++s) {
#pragma unroll
        for (int i = 0; i < kAccPerLane; ++i) flat[i] += s_part[((s - 1) * kAccPerLane + i) * 32 + lane];
      }
      const float mult = w.epi[e] * p.a_mult;
      auto out_row = [&](int nt, int c) { return s_orow[nt * 8 + 2 * t + c]; };
      if constexpr (GEMM1) sm80::epilogue_gemm1<NT>(p.epi, w, e, nb, g, mult, acc, out_row);
      else sm80::epilogue_gemm2<NT>(p.epi, w, e, nb, g, mult, acc, out_row);
    }
    __syncthreads();  // the row tables and s_part are reused by the next slot
  }
}

std::atomic<int64_t> g_launches{0};

// The listed instantiations: {NVFP4, MXFP4 weights} x {GEMM 1, GEMM 2}, 8-token tiles; GEMM 1
// also for one token (ONE).
template <bool MX, bool GEMM1, bool ONE = false>
void launch(const DecodeConfig& c, const Params& p, bool dependent, cudaStream_t stream) {
  const dim3 grid(unsigned(c.grid_x), unsigned(c.grid_y)), block(unsigned(32 * c.splits));
  constexpr int NT = kDecodeTokenTile / 8;
  // the slices' partial sums: (splits - 1) x 2 m-tiles x NT x 4 floats per lane
  const size_t smem = size_t(c.splits - 1) * 2 * NT * 4 * 32 * sizeof(float);
  launch_kernel(decode_grouped_gemm<NT, MX, GEMM1, ONE>, grid, block, smem, dependent, stream, p);
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

// FP4MOE_LOG=1: each config once per shape.
void log_choice(const char* which, const DecodeProblem& pb, const DecodeConfig& c) {
  if (!gemm_log_on()) return;
  char line[512];
  std::snprintf(line, sizeof line, "%s decode rows_bound=%lld E=%lld N=%d K=%d -> %s (%s)", which,
                (long long)pb.rows_bound, (long long)pb.num_experts, pb.N, pb.K,
                c.use ? "register-streamed kernel" : "declined", c.why.c_str());
  gemm_log(line);
}

// The edge of GEMM 1 (and of a GEMM 2 whose GEMM 1 did not run here): kDecodeEdge.
// FP4MOE_DECODE_EDGE (A/B) sets it; 0 runs these kernels, K split, at every shape of at most
// kDecodeTokenTile rows per active expert, where the fast path's tiles would run (with
// FP4MOE_DECODE_EDGE2=0 for GEMM 2 too): their weights go to registers without the fast path's
// shared-memory round trip, which might have paid under the power cap (notes v51). Measured on
// the H200 under the cap (notes v52 §1, W4A16, after 2 s of replays, 5 alternated rounds): 4-7%
// slower at kimi-k2 T = 8-128, gpt-oss-120b T = 32 / 128 and qwen3-235b T = 8 / 32, ~30% at 8 rows
// per expert (qwen3 T = 128). So the edge stays.
int decode_edge() {
  static const int edge = env_int("FP4MOE_DECODE_EDGE", kDecodeEdge);
  return edge;
}

DecodeConfig plan(const char* which, const CudaWeights& cw, const WeightMatrix& w, const ExpertRows& rows,
                  int edge = decode_edge()) {
  const DecodeProblem pb{rows.rows_bound, w.num_experts, w.N, w.K, multiprocessor_count(cw.device)};
  const DecodeConfig c = choose_decode_config(pb, decode_splits(), edge);
  log_choice(which, pb, c);
  return c;
}

Params base_params(const DecodeConfig& c, const WeightMatrix& w, const ExpertRows& rows, const uint16_t* a_bf16,
                   float a_dq) {
  Params p{};
  p.w = w;
  p.rows = rows;
  p.a_bf16 = a_bf16;
  p.a_mult = a_dq;
  p.tiles = c.tiles;
  p.kb_per_split = c.kb_per_split;
  return p;
}

}  // namespace

int64_t decode_launches() { return g_launches.load(std::memory_order_relaxed); }

bool decode_gemm1_takes(const CudaWeights& cw, int64_t rows_bound) {
  const WeightMatrix& w = cw.w13;
  const DecodeProblem pb{rows_bound, w.num_experts, w.N, w.K, multiprocessor_count(cw.device)};
  return choose_decode_config(pb, decode_splits(), decode_edge()).use;
}

namespace {
std::atomic<int> g_splits{-1};  // decode_splits: -1 not read yet; 0 the rule
}  // namespace

int decode_splits() {
  return choice_once(g_splits, [] { return std::max(0, env_int("FP4MOE_DECODE_SPLITS", 0)); });
}

void set_decode_splits(int splits) { g_splits.store(std::max(0, splits), std::memory_order_relaxed); }

bool decode_pdl(int device) {
  if (env_switch("FP4MOE_DECODE_PDL", '0')) return false;
  // The chain's kernels are all built for the same targets: this one's code stands for theirs.
  // Asked once per device (its kernel image does not change), not on every forward's launches.
  constexpr int kKnownDevices = 64;
  static std::atomic<int8_t> known[kKnownDevices];  // 0: not asked yet, 1: no, 2: yes
  if (device >= 0 && device < kKnownDevices && known[device].load(std::memory_order_relaxed) != 0)
    return known[device].load(std::memory_order_relaxed) == 2;
  const bool capable = pdl_capable(decode_grouped_gemm<kDecodeTokenTile / 8, false, true>, device);
  if (device >= 0 && device < kKnownDevices) known[device].store(capable ? 2 : 1, std::memory_order_relaxed);
  return capable;
}

bool decode_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  if (a.a_fp4) return false;  // NVFP4 A reaches here only when it could not be staged (gemm_dispatch.cpp)
  DecodeConfig c = plan("gemm1", cw, cw.w13, a.rows);
  if (!c.use) return false;
  Params p = base_params(c, cw.w13, a.rows, a.a_bf16, a.a_dq);
  p.a_gather = a.a_gather;
  p.epi = sm80::gemm1_epilogue(cw.desc, a);
  // as the dependent of the kernel before it (Gemm1Args::after_kernel), or of the staging kernel
  // with_staged_activations launched for it
  const bool dependent = a.after_kernel && decode_pdl(cw.device);
  // One token, as a dependent: a CTA per top-k slot (k of them, the rows' bound), its expert
  // from the inputs. Without the wait to put its weights ahead of, it gains nothing.
  const Gemm1Args::OneToken& one = a.one_token;
  const bool use_one = dependent && one.topk_ids && one.k == a.rows.rows_bound &&
                       !env_switch("FP4MOE_DECODE_DIRECT", '0');
  if (use_one) {
    p.one_ids = one.topk_ids;
    p.one_map = one.expert_map;
    p.one_num_experts = one.num_experts;
    p.one_slot_row = one.slot_row;
    p.tiles = c.tiles = one.k;
    c.grid_y = std::min(one.k, 65535);  // a CTA walks slots blockIdx.y + i * gridDim.y
  }
  if (cw.w13.block == 32) {
    if (use_one) launch<true, true, true>(c, p, dependent, stream);
    else launch<true, true>(c, p, dependent, stream);
  } else {
    if (use_one) launch<false, true, true>(c, p, dependent, stream);
    else launch<false, true>(c, p, dependent, stream);
  }
  return true;
}

bool decode_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  if (a.a_fp4) return false;  // as in decode_gemm1
  // GEMM 1 on these kernels for the same rows (its rule again; decode_gemm1 declines NVFP4 A only
  // where the staging could not run): then GEMM 2's lower edge. FP4MOE_DECODE_EDGE2 (A/B) sets
  // that edge (2: the same as GEMM 1's).
  static const int edge_after = env_int("FP4MOE_DECODE_EDGE2", kDecodeEdgeAfterDecode);
  const DecodeProblem p1{a.rows.rows_bound, cw.w13.num_experts, cw.w13.N, cw.w13.K, multiprocessor_count(cw.device)};
  const bool after_decode = choose_decode_config(p1, 0, decode_edge()).use;
  const DecodeConfig c = plan("gemm2", cw, cw.w2, a.rows, after_decode ? edge_after : decode_edge());
  if (!c.use) return false;
  Params p = base_params(c, cw.w2, a.rows, a.a_bf16, a.a_dq);
  p.epi.y = a.y;
  const bool dependent = a.rows_settled && decode_pdl(cw.device);
  if (cw.w2.block == 32) launch<true, false>(c, p, dependent, stream);
  else launch<false, false>(c, p, dependent, stream);
  return true;
}

}  // namespace fp4moe::cuda
