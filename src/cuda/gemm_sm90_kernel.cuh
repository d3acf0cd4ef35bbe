// The wgmma path's kernels and their launches (sm_90a), shared by gemm_sm90.cu (the config, the device
// check, GEMM 1) and gemm_sm90_gemm2.cu (GEMM 2): each file instantiates the kernels of its own GEMM, so
// that neither compiles them all.
//
// The grouped GEMMs on Hopper warpgroup MMA (FP4MOE_GEMM=sm90; sm_90a only) for
// prefill-sized batches: NVFP4 from 16-19 rows per active expert by the GEMM's waves of units
// (sm90_min_rows), MXFP4 from kSm90MinRowsPerExpertMx (22) (kimi-k2 from T = 768, qwen3-30b
// from T = 304, gpt-oss-120b from T = 704).
//
// Why: at many rows per expert the fast path (mma.sync, 32 tokens per CTA) re-reads every
// weight tile once per 32 tokens and issues one mma.sync per 16x8x16. Here a CTA covers 64 or
// 128 tokens, and one wgmma.mma_async instruction covers 64 weight rows x all of them.
//
// Swap-AB as in the fast path: weight rows are the MMA's M, tokens its N.
//   - CTA = 2 warpgroups (256 threads) = 256 weight rows (16 fragment rows) x kTok tokens
//     (kTok = 64 or 128, the wgmma N) of one expert.
//   - A (weights) from registers. Per k-step, warp wl of warpgroup wg decodes two fragment
//     blocks with the fast path's load_weight_frag / weight_a_frag (the mma.m16n8k16 A
//     fragment is the wgmma A fragment of the warp's 16 rows, ptx_sm90.cuh), and the
//     warpgroup issues two m64nNk16 wgmma: m-tile mt takes fragment row wg*8 + 2*wl + mt from
//     warp wl. So each warp owns two consecutive fragment rows (gate and up of 16 i for
//     GEMM 1) and its accumulators acc[mt][nt][c] have the fast path's layout: the shared
//     epilogues run unchanged with NT = kTok / 8.
//   - B (activations) from shared memory: bf16 [tok][64 k] per k-block, 128-byte swizzle
//     (the fast path's A-tile XOR swizzle, which is the layout the wgmma descriptor names),
//     rows gathered through a_gather with cp.async.
//   - Pipeline: kStages = 5 stages of {B tile, 16 fragment blocks, their scales} in dynamic
//     shared memory (17 KiB per stage at 64 tokens, 25 KiB at 128), filled by all threads
//     with cp.async, 3 k-blocks ahead: one stage more is still read by the wgmma in flight.
//   - 128 tokens: each wgmma is its own commit group, waited for (wait_group 1) right after
//     the next one is issued: the decode of one A fragment overlaps the MMA of the previous
//     one, and only two A fragments (8 registers) are live. That keeps the kernel at 168
//     registers (128 of them accumulators) without ptxas serializing the wgmma. 64 tokens:
//     the two m-tiles' wgmma of a k-step form one group (pair_groups(); A decoded for both
//     first), so two are queued while the next k-step decodes; 128 registers, two CTAs per
//     SM. (A variant with A through shared memory, 8 wgmma per group, measured slower: its
//     A tiles leave room for one CTA per SM; notes of 2026-11-30.)
// W4A4 (NVFP4 activations in, NVFP4 h out) is staged through bf16 (gemm_internal.hpp,
// nvfp4_staging.cu): gemm1/gemm2 (gemm_dispatch.cpp) dequantize NVFP4 A exactly into the
// scratch for every kernel, these kernels run on it as on bf16 A, and GEMM 1's bf16 h is
// requantized here as the fast path's epilogue would. Without the scratch (gemm_scratch_bytes),
// or with NVFP4 A that could not be staged, sm90_gemm1/2 return false and the caller runs the
// fast path.
//
// Work assignment as in the fast path: blockIdx.x = 256-row tile, blockIdx.y walks the
// (expert, token tile) slots found by a warp scan over count[]. No atomics: deterministic.
//
// Three kernels; sm90_kernel_for picks (FP4MOE_SM90_KERNEL=rs|ws|rsws|rsws4|split forces one):
// by default the RS warp-specialized kernel (rsws, at the end of the file), the fastest at
// every token tile, in its wide variant (rsws4) at 64-token tiles, and split where the batch
// has the tiles for it (kSm90SplitMinWaves, kSm90SplitWideMinWaves): each expert's rows run as
// 128-token tiles (rsws), but a last tile of 64 rows or fewer runs as a 64-token tile (rsws4),
// in a second launch (launch_split). With the width split (Sm90Config::narrow_width,
// launch_width_split), rsws4's last tiles of few rows run in a launch of their own at a
// narrower wgmma (m64n{16..56}k16), and with the wide width (Sm90Config::wide_width) the
// split's last tiles of 65..8v rows run on rsws in a launch of their own at m64n{80,96,112}k16.
// The two below stay as the measured alternatives and are tested like it.
//
// The SS warp-specialized kernel (ws). Why: the RS kernel is latency-bound (H200 ncu, notes
// of 2026-11-30: 8-16 warps per SM, issue slots 33% busy, ~6 cycles per issued
// instruction): each warpgroup decodes its next A
// fragment with only one or two k16 wgmma in flight. The SS attempt (a469863) decoded A into
// shared memory but with the whole CTA alternating decode and MMA between CTA barriers, and one
// CTA per SM. Here the roles are split and overlap through mbarriers:
//   - 4 warpgroups, 256 weight rows x 64 or 128 tokens (the same CTA tile and Sm90Config):
//     2 consumer warpgroups issue SS wgmma (A and B from shared memory), 8 per k-block and
//     warpgroup as one commit group, accumulators in registers, the same epilogues; 2
//     producer warpgroups issue every stage's cp.async (B rows gathered through a_gather,
//     fragment blocks, scales) and decode the FP4 weights into a 128-byte-swizzled bf16 A tile
//     (producer warpgroup 2 + c for consumer warpgroup c: its half of each A buffer).
//   - Shared memory: 3 A buffers (32 KiB each) + 5 stages of 25 KiB (128 tokens) or 7 of
//     17 KiB (64 tokens): one CTA per SM, persistent (grid = SMs), walking (slot, row tile)
//     units, so the producers load and decode the next unit while the consumers finish the
//     last MMAs and the epilogue of the current one (row tables double-buffered).
//   - Registers: 128 per thread at launch (512 threads); at 128 tokens the producers give 40
//     back (setmaxnreg 88) and the consumers take them (168: the RS kernel's budget, now
//     without the decode).
//   - No CTA-wide barrier after the setup; the race-freedom argument is at the kernel.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/ptx_sm90.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"


namespace fp4moe::cuda {

// The path's state (gemm_sm90.cu): launch counters, the tests' and the environment's overrides.
namespace sm90_detail {

extern std::atomic<int64_t> g_launches, g_ws_launches, g_rsws_launches, g_rsws4_launches, g_width_split_launches,
    g_wide_width_launches, g_folded_launches;
// Tests: the width split's narrow width (set_sm90_narrow_width; 0: the config's) and the
// split's wide width (set_sm90_wide_width).
extern std::atomic<int> g_narrow_width, g_wide_width;
// Tests: rsws4's width split's fold (set_sm90_narrow_fold; 0: the config's).
extern std::atomic<int> g_narrow_fold;

// The kernel choice: -1 until first asked, then an Sm90Kernel.
extern std::atomic<int> g_kernel;
// Tests: at most this many CTAs for the warp-specialized kernels (0: one per SM).
extern std::atomic<int> g_ws_grid_limit;

// The config of one GEMM, or use = false (the caller runs the fast path). staged: NVFP4
// operands, which need the staging scratch; staging_refused says why they cannot have it ("": they can).
Sm90Config plan(const char* which, const CudaWeights& cw, const WeightMatrix& w, const ExpertRows& rows,
                bool staged, const std::string& staging_refused);
// "" when GEMM 2's kernels have sm_90a code for the current device and may use its shared memory,
// else why not (gemm_sm90_gemm2.cu; check_device calls it once per device).
std::string prepare_gemm2();
struct Params;
struct WeightMaps;
// GEMM 1's launches at the width split's narrow widths (rsws4) and at the split's wide widths
// (rsws), and the checks of those kernels (gemm_sm90_gemm1_widths.cu: launch_rsws4_narrow,
// launch_rsws_wide, prepare_rsws4_narrow, prepare_rsws_wide).
void launch_rsws4_narrow_gemm1(int width, dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream,
                               bool dependent);
void launch_rsws_wide_gemm1(int width, dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream,
                            bool dependent);
std::string prepare_rsws4_narrow_gemm1();
std::string prepare_rsws_wide_gemm1();

}  // namespace sm90_detail

// Why the wgmma kernels decline NVFP4 A: gemm1/gemm2 stage it to bf16 wherever these kernels
// could run, so it arrives here only when that was impossible.
inline constexpr const char* kUnstagedA =
    "NVFP4 A was not staged to bf16 (gemm_dispatch.cpp: no room in the scratch, or A rows unknown)";

namespace {

using namespace sm90_detail;

// The most tiles a fold at narrow width w needs: rsws4's last parts have at most 64 rows.
inline int fold_most(int w) { return (kSplitNarrowTile + 8 * w - 1) / (8 * w); }

constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;
constexpr int kBlocksPerCta = kSm90RowTile / kFragRows;  // 16 fragment rows
constexpr int kStages = 5;
constexpr int kSmemPerSm = 228 * 1024;   // H100/H200 shared memory per SM (1 KiB of it reserved per CTA)
constexpr int kSmemPerCta = 227 * 1024;  // the most one CTA may opt in to

// One pipeline stage of every wgmma kernel: [B tile][16 fragment blocks][their scales].
template <int NT>
struct StageLayout {
  static constexpr int kTok = 8 * NT;                             // tokens per CTA = the wgmma N
  static constexpr int kBBytes = kTok * 128;                      // bf16 [tok][64 k], 128-byte swizzle
  static constexpr int kWBytes = kBlocksPerCta * kFragWords * 4;  // 8 KiB
  static constexpr int kSBytes = kBlocksPerCta * 64;              // room for NVFP4's 64 B per block
  static constexpr int kStageBytes = kBBytes + kWBytes + kSBytes;
};

// The RS kernel's stages and limits.
template <int NT>
struct Tile : StageLayout<NT> {
  using S = StageLayout<NT>;
  using S::kStageBytes, S::kTok;
  static constexpr int kPrefetch = kStages - 2;  // k-blocks loaded ahead; one more stage is read by the wgmma in flight
  static constexpr int kSmem = kStages * kStageBytes + 1024;      // + slack to align the base to 1024
  static constexpr int kStaticSmem = 2 * kTok * 8 + 16;           // row tables, expert and tile
  // Both m-tiles' wgmma in one commit group (two queued while the next k-step decodes): the
  // 64-token kernel has the registers for the second A set (H200, kimi-k2 T = 2048 / 8192:
  // 7.70 / 19.85 ms vs 7.90 / 20.17 one wgmma per group); at 128 tokens it measured slower
  // (T = 16384 47.4 vs 44.5 ms).
  static constexpr bool pair_groups() { return NT == 8; }  // a function: no unused-member warning where
                                                           // the kernels are compiled out (not sm_90a)
  static constexpr int kCtasPerSm = NT == 8 ? 2 : 1;              // what the registers allow (acc: 2 x kTok/2)
  static constexpr int kMaxRegs = NT == 8 ? 128 : 168;            // 2 CTAs; 1 CTA (168: room for a 3rd warpgroup)
  static_assert(kStageBytes % 1024 == 0,
                "every stage's B tile must start 1024-byte aligned: the 128-byte swizzle repeats every 8 rows");
  static_assert(kSmem + kStaticSmem <= kSmemPerCta, "one CTA's shared memory must fit the opt-in limit");
  static_assert(kCtasPerSm * (kSmem + kStaticSmem + 1024) <= kSmemPerSm,
                "kCtasPerSm CTAs must fit in one SM's shared memory");
  static_assert((kTok * 8) % kThreads == 0, "the B tile's 16-byte chunks must divide evenly over the threads");
  static_assert(kTok <= kThreads, "one thread per token row fills the row tables");
  static_assert(kPrefetch >= 2, "keep at least two k-blocks of loads in flight");
};

}  // namespace

// A launch's parameters (sm90_detail: the narrow-width launches of GEMM 1 take them across files).
namespace sm90_detail {
struct Params {
  WeightMatrix w;
  ExpertRows rows;
  const uint16_t* a_bf16;
  const int32_t* a_gather;
  float a_mult;  // a_dq
  int64_t tiles;
  TileSpan span;  // which of an expert's tiles this launch runs (persistent kernels; the rs kernel: all)
  SpanCut cut;    // where span cuts (the split's, the width split's or the wide width's)
  sm80::Epilogue epi;
};
}  // namespace sm90_detail

namespace {

// The k extent of B's rows, the copies' bound: B (staged x, h) is k-permuted, rows of
// kperm_row(w.K) = w.Kp entries with zeros past w.K, so it holds whole k-blocks
// (gemm_internal.hpp kperm_index).
__device__ __forceinline__ int b_row_k(const WeightMatrix& w) { return w.Kp; }

// Both kernels' epilogue: the fast path's, on the warp's fragment rows nbw, nbw + 1 of expert e.
// NVFP4 h is not written here: a second kernel requantizes it from the bf16 h (staging).
// kAct: as epilogue_gemm1's (GEMM 1 only).
template <int NT, bool GEMM1, int kAct = -1, class OutRow, int MT>
__device__ __forceinline__ void epilogue(const Params& p, int e, int nbw, int g, const float (&acc)[MT][NT][4],
                                         OutRow out_row) {
  const float mult = p.w.epi[e] * p.a_mult;
  if constexpr (GEMM1) {
    sm80::Epilogue ep = p.epi;
    ep.h_fp4 = nullptr;
    ep.h_values = nullptr;
    sm80::epilogue_gemm1<NT, kAct>(ep, p.w, e, nbw, g, mult, acc, out_row);
  } else {
    sm80::epilogue_gemm2<NT>(p.epi, p.w, e, nbw, g, mult, acc, out_row);
  }
}

template <int NT, bool GEMM1>
__global__ void __launch_bounds__(kThreads) __maxnreg__(Tile<NT>::kMaxRegs) sm90_grouped_gemm(const Params p) {
#if defined(FP4MOE_SM90A)
  using T = Tile<NT>;
  constexpr int kTok = T::kTok;
  extern __shared__ uint8_t smem_raw[];
  __shared__ int s_expert, s_tile;
  __shared__ int64_t s_arow[kTok];  // A row of token j, -1 past the expert's rows
  __shared__ int64_t s_orow[kTok];  // output row of token j, -1 past the expert's rows

  // Stages from the first 1024-byte boundary of the dynamic shared memory.
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t pad = (1024u - (raw & 1023u)) & 1023u;
  uint8_t* smem = smem_raw + pad;
  const uint32_t smem_addr = raw + pad;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int wg = warp / 4, wl = warp % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows;
  const int K = b_row_k(w);
  const int nb0 = blockIdx.x * kBlocksPerCta;
  const int fb = wg * 8 + 2 * wl;  // the warp's fragment rows in the CTA: fb (m-tile 0), fb + 1 (m-tile 1)
  const bool row_ok[2] = {nb0 + fb < NB, nb0 + fb + 1 < NB};  // fragment rows past N: zero weights
  const bool mx = w.block == 32;
  const int sb = frag_scale_bytes(w.block);
  const int s_off = sm80::scale_word_offset(g, t, sb), s_byte = sm80::scale_word_byte(t, mx);
  const uint32_t decode_low = sm80::decode_table(w);

  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    // ---- which (expert, token tile) is this slot: warp 0 scans count[] ----
    // (sm80::enter_slot's steps, written out: through the call the 128-token kernel, which
    // sits at its 168-register cap, spills a few registers)
    if (warp == 0)
      sm80::find_slot<kTok, sm80::kSm90FindSlotPerLane>(slot, p.rows.count, w.num_experts, lane, &s_expert, &s_tile);
    __syncthreads();
    const int e = s_expert;
    if (e < 0) return;  // past the real work; later slots are too
    if (threadIdx.x < kTok)
      sm80::fill_row_tables<kTok>(e, s_tile, p.rows.begin, p.rows.count, p.a_gather, s_arow, s_orow);
    __syncthreads();

    // ---- stage `stage` <- k-block kb: B tile, 16 fragment blocks, their scales ----
    // Each thread copies the same places of every stage: B chunk cb of tokens jb + 32i, the
    // 16 bytes of lane `lane` of fragment blocks wb + 8i, and scale chunk `threadIdx.x` (if any).
    const int jb = threadIdx.x / 8, cb = threadIdx.x % 8, wb = warp;
    // B chunk ch (k 8ch..8ch+7) of token j sits at j * 128 + (ch ^ j % 8) * 16; (jb + 32i) % 8 = jb % 8.
    const int b_dst = jb * 128 + sm80::a_bf16_swizzle(jb, cb);
    const int sc_b = threadIdx.x / (sb / 16), sc_part = threadIdx.x % (sb / 16);  // scale block, 16-byte part
    const bool sc_copy = int(threadIdx.x) < kBlocksPerCta * sb / 16 && nb0 + sc_b < NB;
    const int64_t g0 = (int64_t(e) * w.groups + nb0 / kFragGroup) * KB * kFragGroup;  // the CTA's first block
    auto load_stage = [&](int stage, int kb) {
      uint8_t* st = smem + stage * T::kStageBytes;
      const int k = kb * kFragK + cb * 8;
#pragma unroll
      for (int i = 0; i < kTok / 32; ++i) {  // zeros past the expert's rows and past K (weights are 0 there too)
        const int64_t row = s_arow[jb + 32 * i];
        const bool valid = row >= 0 && k < K;
        ptx::cp_async_16(st + b_dst + i * 32 * 128, valid ? p.a_bf16 + row * K + k : p.a_bf16, valid);
      }
#pragma unroll
      for (int i = 0; i < kBlocksPerCta / 8; ++i) {  // row wb of the CTA's group i (frag_block)
        const int nb = nb0 + wb + 8 * i;
        if (nb < NB)
          ptx::cp_async_16(st + T::kBBytes + (wb + 8 * i) * (kFragWords * 4) + lane * 16,
                           w.q + (g0 + (int64_t(i) * KB + kb) * kFragGroup + wb) * kFragWords + lane * 4, true);
      }
      if (sc_copy)
        ptx::cp_async_16(st + T::kBBytes + T::kWBytes + sc_b * 64 + sc_part * 16,
                         w.scale + (g0 + (int64_t(sc_b / kFragGroup) * KB + kb) * kFragGroup + sc_b % kFragGroup) * sb +
                             sc_part * 16,
                         true);
    };

    // acc[mt][nt][c]: m-tile mt (fragment row fb + mt), tokens nt*8 + 2t + c%2, rows g (c < 2), g+8
    float acc[2][NT][4];
    sm80::zero_acc<NT, true>(acc);  // zeroed before the first wgmma_fence

#pragma unroll
    for (int s = 0; s < T::kPrefetch; ++s) {
      if (s < KB) load_stage(s, s);
      ptx::cp_async_commit_group();
    }
    for (int kb = 0; kb < KB; ++kb) {
      ptx::cp_async_wait_group<T::kPrefetch - 1>();  // this thread's copies of k-block kb have landed
      ptx::fence_proxy_async_shared();            // ... and are visible to wgmma's async proxy
      // Stage kb visible to all. Stage kb - 2 is no longer read: every warp passed its last
      // weight loads of it, and each warpgroup has at most one wgmma group in flight (k-block
      // kb - 1, k-step 3, m-tile 1), so it may be refilled with k-block kb + kPrefetch.
      __syncthreads();
      if (kb + T::kPrefetch < KB) load_stage((kb + T::kPrefetch) % kStages, kb + T::kPrefetch);
      ptx::cp_async_commit_group();

      const int stage = kb % kStages;
      const uint8_t* st = smem + stage * T::kStageBytes;
      // The warp's two fragment blocks: e2m1 words (16 bytes per lane) and the rows' scale pair,
      // once per k-block (kperm: one pair for the four k-steps).
      uint4 wq[2];
      uint32_t sp[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const uint8_t* frag = st + T::kBBytes + (fb + mt) * (kFragWords * 4);
        const uint8_t* scales = st + T::kBBytes + T::kWBytes + (fb + mt) * 64;
        uint32_t ws = 0u;
        wq[mt] = make_uint4(0u, 0u, 0u, 0u);  // past the last fragment row: zero weights, outputs not written
        if (row_ok[mt]) sm80::load_weight_frag(frag, scales, lane, s_off, wq[mt], ws);
        sp[mt] = sm80::scale_rows_bf16x2(ws, s_byte, mx);
      }
      // k-step kk reads B bytes 32kk..32kk+31 of each token row: start address + 32kk (the
      // hardware applies the swizzle to the full address, so the offset stays inside the row).
      const uint64_t desc = ptx::wgmma_desc_kmajor_sw128(smem_addr + uint32_t(stage * T::kStageBytes));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (T::pair_groups()) {
          // Both m-tiles' A decoded first, then their two wgmma as one group: two wgmma queued
          // while the next k-step decodes.
          uint32_t a[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            sm80::weight_a_frag(a[mt], wq[mt], sp[mt], kk, decode_low);
#pragma unroll
            for (int j = 0; j < 4; ++j) ptx::reg_fence(a[mt][j]);
          }
          ptx::wgmma_fence();
          ptx::wgmma_m64k16_bf16_rs<NT>(acc[0], a[0], desc + uint64_t(2 * kk));
          ptx::wgmma_m64k16_bf16_rs<NT>(acc[1], a[1], desc + uint64_t(2 * kk));
          ptx::wgmma_commit_group();
          ptx::wgmma_wait_group<1>();  // the previous k-step's pair is done: its A registers are free
        } else {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          uint32_t a[4];
          sm80::weight_a_frag(a, wq[mt], sp[mt], kk, decode_low);
#pragma unroll
          for (int j = 0; j < 4; ++j) ptx::reg_fence(a[j]);  // decoded before the fence
          ptx::wgmma_fence();
          ptx::wgmma_m64k16_bf16_rs<NT>(acc[mt], a, desc + uint64_t(2 * kk));  // (32 bytes) >> 4
          ptx::wgmma_commit_group();
          ptx::wgmma_wait_group<1>();  // the previous group is done: its A registers are free
          // Decode the next A only now: at most two A sets (in flight, being decoded) stay live.
          ptx::reg_fence(wq[1 - mt].x);
          ptx::reg_fence(wq[1 - mt].y);
          ptx::reg_fence(wq[1 - mt].z);
          ptx::reg_fence(wq[1 - mt].w);
        }
        }
      }
    }
    ptx::wgmma_wait_group<0>();
    sm80::fence_acc(acc);  // read only after the wait
    ptx::cp_async_wait_group<0>();

    // ---- epilogue: the fast path's, on the warp's fragment rows nbw, nbw + 1 ----
    const int nbw = nb0 + fb;  // even
    if (nbw < NB) {            // NB is even for GEMM 1, so both m-tiles are real there
      // Read from shared memory at each use: held in registers, 2 * NT row indices (int64)
      // would sit next to the 4 * NT accumulators of each m-tile.
      const volatile int64_t* orow = s_orow;
      epilogue<NT, GEMM1>(p, e, nbw, g, acc, [&](int nt, int c) -> int64_t { return orow[nt * 8 + 2 * t + c]; });
    }
    __syncthreads();  // the row tables and stages are reused by the next slot
  }
#endif  // FP4MOE_SM90A
}

// ===========================================================================
// The warp-specialized kernel (128-token tiles by default; see the file header for why)
// ===========================================================================
//
// CTA = 4 warpgroups (512 threads), 256 weight rows x kTok tokens of one expert, as above:
//   warpgroups 0, 1: consumers. Warpgroup c issues the SS wgmma of fragment rows c*8 .. c*8+7
//     (m-tiles 2c, 2c+1 of the A tile); warp wl owns fragment rows fb = c*8 + 2*wl, fb + 1 and
//     holds their accumulators acc[mt][nt][c] in the RS kernel's layout (same epilogues).
//   warpgroups 2, 3: producers. All 256 threads share the cp.async loads of each stage, and
//     warpgroup 2 + c decodes the fragment rows that consumer warpgroup c reads into its half
//     of an A buffer, so each (producer, consumer) pair hands A over through its own barriers.
//
// Dynamic shared memory, from its first 1024-byte boundary:
//   [A buffer 0 .. kWsABufs-1][stage 0 .. kStages-1]
//   A buffer: bf16 [4 m-tiles][64 rows][64 k], K-major, 128-byte swizzle (the layout
//     wgmma_desc_kmajor_sw128 names); m-tile 2c + mt, row 16*wl + r holds row r (0..15) of
//     fragment row c*8 + 2*wl + mt: the wgmma's D rows of warp wl are that fragment row.
//   stage: [B tile][16 fragment blocks][their scales]
//     B tile: bf16 [kTok][64 k], K-major, 128-byte swizzle (chunk ch of token j at ch ^ j % 8)
//     block b (512 B): gemm_internal.hpp's 16-byte lane slots [lane 32] stored as [t 4][g 8]
//       (the slot of lane 4g + t at (8t + g) * 16): the decode's reads are conflict-free
//     scales: block b at b * 64 bytes, as gemm_internal.hpp lays them out ([g 8][c][half 2])
//
// Barriers (mbarriers, shared memory; `it` counts the CTA's k-blocks over all its slots, the
// same in every role since every slot has KB of them; fill f of a ring slot = it / ring size):
//   full[s]      256 arrivals: each producer thread's cp.async.mbarrier.arrive.noinc, made
//                when its copies of the stage have landed
//   empty[s]     512: every thread once per fill, after its last read of the stage (consumers:
//                B, once the wgmma group that read it is complete; producers: W and scales)
//   a_full[a][c] 128: the threads of producer warpgroup 2 + c, after writing A buffer a's half
//                c and fence.proxy.async
//   a_empty[a][c] 128: the threads of consumer warpgroup c, once the wgmma group that read A
//                buffer a's half c is complete
//   tables.full[b] / tables.empty[b] (UnitTables) 256 / 256: the row tables of the CTA's
//                unit n (n-th (slot, row tile) it walks) live in set b = n % 2; the
//                producers fill them, the consumers release them after their epilogue
//
// Race freedom (who waits for which phase before reading or overwriting each buffer):
//  - stage s, fill f = k-block it: producers write it (cp.async) only after waiting for
//    empty[s] phase f - 1, i.e. after all 512 threads released fill f - 1: the consumers'
//    wgmma of it - kStages completed (wait_group), the producers' reads of its weights done.
//    Consumers and decoders read it only after full[s] phase f: every producer's copies of it
//    have landed. No thread can be two phases behind on either barrier: phase f + 1 of full
//    needs fill f + 1, which needs this thread's own release of fill f; phase f of empty needs
//    fill f, which needs the waiting producer's own copies and arrive.
//  - A buffer a, half c, fill f: producer warpgroup 2 + c writes it after a_empty[a][c] phase
//    f - 1 (consumer warpgroup c's wgmma group of k-block it - kWsABufs complete), then
//    fence.proxy.async (its generic writes -> wgmma's async proxy), then arrives on a_full;
//    consumer warpgroup c issues the wgmma that read it only after a_full[a][c] phase f.
//  - B data are written by cp.async (generic proxy) of other threads: each consumer thread
//    executes fence.proxy.async after its full wait and before its wgmma (the producers
//    cannot: they do not observe when their copies land).
//  - Row tables set b, unit n: the producers rewrite it (n >= 2) only after tables.empty[b]
//    phase n/2 - 1 (every consumer thread finished unit n - 2's epilogue); the consumers read
//    the expert and output rows only after tables.full[b] phase n/2 (every producer wrote its
//    part: warp 0 of the producers the expert and tile, threads [0, kTok) the rows; a named
//    barrier among the producers orders the expert before the rows are filled).
//  - The accumulators are written by wgmma only until wait_group 0 after a slot's k loop.
// No CTA-wide barrier after the barriers' initialization: the producers start the next unit
// (row tables, loads, decode) while the consumers finish the last k-blocks and the epilogue.
//
// On the H200 (2026-11-30): every CudaGemmWs* case passes, racecheck 0 hazards, synccheck and
// memcheck 0 errors on the 3-CTA cases. Not yet profiled: at kimi-k2 T = 16384 it reaches 44%
// of the floor where 78% is the aim. To look at with ncu: fence.proxy.async compiles to
// MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S; if that MEMBAR waits for the producer's own cp.async in
// flight (stall reason "membar"), the loads must move to warps that do not decode.
constexpr int kWsConsumerWgs = 2;
constexpr int kWsThreads = 4 * 128;
constexpr int kWsConsumerThreads = kWsConsumerWgs * 128;
constexpr int kWsProducerThreads = kWsThreads - kWsConsumerThreads;
constexpr int kWsABufs = 3;               // A buffers: the decode may run up to two k-blocks ahead of the MMAs
[[maybe_unused]] constexpr int kWsProducerBarrier = 1;  // bar.sync id of the producer threads (0 is __syncthreads')
constexpr int kWsLaunchRegs = 65536 / kWsThreads;  // 128: the registers per thread at launch (1 CTA per SM)
constexpr int kMTileRows = 64;                            // the wgmma M
constexpr int kMTileBytes = kMTileRows * kFragK * 2;      // bf16 [64 rows][64 k]: 8 KiB
constexpr int kATileBytes = kSm90RowTile * kFragK * 2;    // bf16 [256 rows][64 k]: 32 KiB, 4 m-tiles
constexpr int kSwizzleAtom = 1024;                        // 8 rows of 128 B: where the 128-byte swizzle repeats
constexpr int kWsBarrierBytes = 512;                      // room for the mbarriers in static shared memory
static_assert(kBlocksPerCta * 8 * 2 == kWsProducerThreads,
              "the decode gives each producer thread one (fragment row, row pair g / g+8, k-step pair)");
static_assert(kBlocksPerCta * 32 % kWsProducerThreads == 0, "the fragment blocks' 16-byte slots divide evenly");

#if defined(FP4MOE_SM90A)  // (the synchronization wrappers exist for sm_90a only)
// The persistent kernels' (ws, rsws) row tables, one set per unit in flight: the CTA's unit
// n uses set n % 2, which the producers fill and the consumers release after their epilogue,
// through full[b] / empty[b]. Race freedom as argued at the ws kernel.
template <int kTok>
struct UnitTables {
  int expert[2], tile[2];  // the unit's (expert, token tile); expert -1 past the real work
  int64_t arow[2][kTok];   // A row of token j, -1 past the expert's rows
  int64_t orow[2][kTok];   // output row of token j, -1 likewise
  uint64_t full[2], empty[2];

  // Thread 0, before the CTA barrier that makes barrier initializations visible.
  __device__ void init(int producers, int consumers) {
    for (int b = 0; b < 2; ++b) {
      ptx::mbarrier_init(shared_address(&full[b]), uint32_t(producers));
      ptx::mbarrier_init(shared_address(&empty[b]), uint32_t(consumers));
    }
  }
  // Producer thread ptid of kProducers (whole warps from a warp boundary): once every consumer
  // released unit n - 2, set n % 2 <- unit n = `slot` (its first warp scans count[], threads
  // [0, kTok) fill the rows), announced on full. Returns the unit's expert. kFolds: the
  // launch's cut may fold (rsws4's; fill_row_tables).
  template <int kProducers, bool kFolds = false>
  __device__ int produce(int n, int64_t slot, const ExpertRows& rows, const int32_t* a_gather, int64_t num_experts,
                         TileSpan span, SpanCut cut, int ptid) {
    const int b = n % 2;
    ptx::mbarrier_wait_parity(shared_address(&empty[b]), ((n / 2) & 1) ^ 1);  // unit n - 2's epilogue is done
    if (ptid < 32)
      sm80::find_slot<kTok, sm80::kSm90FindSlotPerLane>(slot, rows.count, num_experts, ptid, &expert[b], &tile[b],
                                                        span, cut);
    ptx::named_barrier_sync(kWsProducerBarrier, kProducers);
    const int e = expert[b];
    if (e >= 0 && ptid < kTok)
      sm80::fill_row_tables<kTok, kFolds>(e, tile[b], rows.begin, rows.count, a_gather, arow[b], orow[b], ptid, span,
                                          cut);
    ptx::named_barrier_sync(kWsProducerBarrier, kProducers);  // the A rows, visible to all producers
    ptx::mbarrier_arrive(shared_address(&full[b]));
    return e;
  }
  // Consumers: unit n's expert, once its tables are filled.
  __device__ int consume(int n) {
    ptx::mbarrier_wait_parity(shared_address(&full[n % 2]), (n / 2) & 1);
    return expert[n % 2];
  }
  // Consumers: this thread is done with unit n's tables.
  __device__ void release(int n) { ptx::mbarrier_arrive(shared_address(&empty[n % 2])); }
  static __device__ uint32_t shared_address(const void* q) { return uint32_t(__cvta_generic_to_shared(q)); }
};

// A producer's B sources of k-block 0 for its chunk cb (k 8cb..8cb+7) of tokens jb + kStep * i
// (each k-block adds its stride); a row past the expert's rows reads row 0's, so every address
// is in bounds. Returns the tokens that are real: bit i for token jb + kStep * i.
template <int kChunks, int kStep>
__device__ __forceinline__ uint32_t b_sources(const int64_t* arow, int jb, int cb, const uint16_t* a_bf16, int K,
                                              const uint8_t* (&src)[kChunks]) {
  uint32_t real = 0;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t row = arow[jb + kStep * i];
    src[i] = reinterpret_cast<const uint8_t*>(a_bf16 + max(row, int64_t(0)) * K + cb * 8);
    real |= row >= 0 ? 1u << i : 0u;
  }
  return real;
}

// The producer's B copies of k-block kb into stage st, from b_sources' src and real: chunk i
// to b_dst + i * kStep * 128 (token jb + kStep * i keeps jb's swizzle); zeros past K and past
// the expert's rows.
template <int kChunks, int kStep>
__device__ __forceinline__ void b_copies(uint8_t* st, int b_dst, const uint8_t* (&src)[kChunks], uint32_t real, int kb,
                                         int cb, int K) {
  const bool k_ok = kb * kFragK + cb * 8 < K;  // past K: zeros (the weights are zero there too)
  const int off = k_ok ? kb * (kFragK * 2) : 0;
#pragma unroll
  for (int i = 0; i < kChunks; ++i)
    ptx::cp_async_16(st + b_dst + i * kStep * 128, src[i] + off, k_ok && (real >> i) % 2 != 0);
}
#endif  // FP4MOE_SM90A

template <int NT>
struct WsTile : StageLayout<NT> {
  using S = StageLayout<NT>;
  using S::kStageBytes, S::kTok;
  static constexpr int kTableBytes = 2 * 2 * kTok * 8 + 2 * 2 * 4;  // two sets of row tables, experts, tiles
  // The stages take what the A buffers leave of one CTA's shared memory: 5 at 128 tokens
  // (25 KiB each), 7 at 64 (17 KiB). One CTA per SM: the A buffers (96 KiB) do not fit twice.
  static constexpr int kStages =
      (kSmemPerCta - kTableBytes - kWsBarrierBytes - kSwizzleAtom - kWsABufs * kATileBytes) / kStageBytes;
  // k-blocks the loads run ahead of the decode. The refill of the stage of k-block it + kPrefetch
  // waits for the release of it + kPrefetch - kStages = it - 3, which the consumers give when
  // they free A buffer (it - 3) % 3, the one the decode of it waits for anyway: a deeper
  // prefetch would stall the decode on the loads' barrier.
  static constexpr int kPrefetch = kStages - kWsABufs;
  static constexpr int kSmem = kSwizzleAtom + kWsABufs * kATileBytes + kStages * kStageBytes;
  static constexpr int kBarriers = 2 * kStages + 2 * kWsABufs * kWsConsumerWgs + 4;
  // 128 tokens: the consumers' 128 accumulators (+ the epilogue) need more than the 128
  // registers per thread that 512 threads get at launch; the producers give theirs up
  // (setmaxnreg). 64 tokens: 128 each is enough (0: no setmaxnreg).
  static constexpr int kProducerRegs = NT == 16 ? 88 : 0;
  static constexpr int kConsumerRegs = NT == 16 ? 168 : 0;
  static_assert(kProducerRegs * kWsProducerThreads + kConsumerRegs * kWsConsumerThreads <= kWsLaunchRegs * kWsThreads,
                "the registers the roles ask for must be the ones the CTA got at launch");
  static_assert(kStageBytes % kSwizzleAtom == 0 && kATileBytes % kSwizzleAtom == 0 && kMTileBytes % kSwizzleAtom == 0,
                "every A m-tile and B tile must start 1024-byte aligned: the 128-byte swizzle repeats every 8 rows");
  static_assert(kBarriers * 8 <= kWsBarrierBytes, "the mbarriers must fit their reserved bytes");
  static_assert(kSmem + kTableBytes + kWsBarrierBytes <= kSmemPerCta, "one CTA's shared memory must fit the opt-in limit");
  static_assert(kPrefetch >= 2, "keep at least two k-blocks of loads ahead of the decode");
  static_assert((kTok * 8) % kWsProducerThreads == 0, "the B tile's 16-byte chunks must divide evenly over the producers");
  static_assert(kTok <= kWsProducerThreads, "one producer thread per token row fills the row tables");
};

template <int NT, bool GEMM1>
__global__ void __launch_bounds__(kWsThreads, 1) sm90_ws_gemm(const Params p) {
#if defined(FP4MOE_SM90A)
  using T = WsTile<NT>;
  constexpr int kTok = T::kTok, kStages = T::kStages, kPrefetch = T::kPrefetch;
  extern __shared__ uint8_t smem_raw[];
  __shared__ UnitTables<kTok> tables;
  __shared__ uint64_t full_bar[kStages], empty_bar[kStages];
  __shared__ uint64_t a_full_bar[kWsABufs][kWsConsumerWgs], a_empty_bar[kWsABufs][kWsConsumerWgs];
  auto addr = [](const void* q) { return uint32_t(__cvta_generic_to_shared(q)); };

  const uint32_t raw = addr(smem_raw);
  const uint32_t pad = (kSwizzleAtom - raw % kSwizzleAtom) % kSwizzleAtom;
  uint8_t* const a_bufs = smem_raw + pad;
  uint8_t* const stages = a_bufs + kWsABufs * kATileBytes;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(addr(&full_bar[s]), kWsProducerThreads);
      ptx::mbarrier_init(addr(&empty_bar[s]), kWsThreads);
    }
    for (int a = 0; a < kWsABufs; ++a)
      for (int c = 0; c < kWsConsumerWgs; ++c) {
        ptx::mbarrier_init(addr(&a_full_bar[a][c]), 128);
        ptx::mbarrier_init(addr(&a_empty_bar[a][c]), 128);
      }
    tables.init(kWsProducerThreads, kWsConsumerThreads);
  }
  __syncthreads();  // the barriers' initialization, visible to all

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // The warpgroup through a shuffle: the compiler then knows it is warp-uniform.
  const int wg = __shfl_sync(0xFFFFFFFFu, warp / 4, 0), wl = warp % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows;
  const int K = b_row_k(w);
  const bool mx = w.block == 32;
  const int sb = frag_scale_bytes(w.block);
  const uint32_t decode_low = sm80::decode_table(w);
  // The persistent walk: unit u = (slot u / row_tiles, 256-row tile u % row_tiles), the CTAs
  // taking u = blockIdx.x, + gridDim.x, ... (the CTAs next to each other share a slot's B).
  const int row_tiles = (NB + kBlocksPerCta - 1) / kBlocksPerCta;
  const int64_t units = p.tiles * row_tiles;

  if (wg >= kWsConsumerWgs) {
    // ================= producers: loads of every stage, decode of half of each A buffer =================
    if constexpr (T::kProducerRegs > 0) ptx::setmaxnreg_dec<T::kProducerRegs>();
    const int c = wg - kWsConsumerWgs;  // the consumer warpgroup this warpgroup decodes for
    const int ptid = int(threadIdx.x) - kWsConsumerThreads;

    // The decode (the mapping of the SS kernel of a469863): lanes 0-15 of warp wl decode
    // fragment row fd = c*8 + 2*wl, lanes 16-31 fd + 1 (what consumer warp wl of warpgroup c
    // reads); lane dg + 8 dh does rows dg and dg + 8, k-steps 2dh and 2dh + 1, i.e. the words
    // (k-steps 2dh, 2dh + 1) of the four lane slots 4dg + t, t = 0..3, which together hold
    // whole 16-byte chunks 4dh..4dh+3 of both rows: eight 16-byte stores per k-block.
    // Reads: per t, 16 lanes read 8 bytes each of one contiguous 128 B ([t][g] slots), no
    // conflict; stores: the 8 lanes of one store phase (dg = 0..7) hit chunks x ^ dg, 8
    // different bank groups.
    const int dmt = lane / 16, dg = lane % 8, dh = (lane / 8) % 2;
    const int fd = c * 8 + 2 * wl + dmt;
    bool d_ok = false;  // per unit: fragment row fd is below N (past N: zero weights; the stage holds stale bytes there)
    const int d_frag = T::kBBytes + fd * (kFragWords * 4) + dg * 16 + dh * 8;  // + t * 128 for lane slot 4dg + t
    // The scale bytes of rows dg, dg + 8, every column (NVFP4 [c 4][half 2], MX [c 2][half 2]):
    // lane slot 4dg + t takes column t (MX t / 2) at both k-steps (kperm: frag_scale_select).
    const int d_scale = T::kBBytes + T::kWBytes + fd * 64 + dg * (sb / 8);
    // Row dg of fragment row fd in the A buffer (row dg + 8 is one swizzle atom on); chunk
    // 4dh + x sits at chunk (4dh + x) ^ dg = d_x ^ x.
    const int d_row = (c * 2 + dmt) * kMTileBytes + (16 * wl + dg) * 128;
    const int d_x = (4 * dh) ^ dg;
    auto decode = [&](const uint8_t* st, uint8_t* a_buf) {
      uint2 q[4];  // [t]: words of k-steps 2dh (x), 2dh + 1 (y) of lane slot 4dg + t
      uint2 sw = make_uint2(0u, 0u);
#pragma unroll
      for (int tt = 0; tt < 4; ++tt)
        q[tt] = d_ok ? *reinterpret_cast<const uint2*>(st + d_frag + tt * 128) : make_uint2(0u, 0u);
      if (d_ok)
        sw = mx ? make_uint2(*reinterpret_cast<const uint32_t*>(st + d_scale), 0u)
                : *reinterpret_cast<const uint2*>(st + d_scale);
      uint32_t s[4];  // [t]: the scale pair of lane slot 4dg + t, row dg low, dg + 8 high
#pragma unroll
      for (int tt = 0; tt < 4; ++tt) {
        int word, byte;
        frag_scale_select(tt, mx, &word, &byte);
        s[tt] = sm80::scale_rows_bf16x2(word ? sw.y : sw.x, byte, mx);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {  // k-step 2dh + i: chunks 4dh + 2i (its k 0-7), 4dh + 2i + 1 (k 8-15)
        uint32_t v[4][4];  // [t][j]: weight_a_frag's a_j of lane slot 4dg + t, before the scale
#pragma unroll
        for (int tt = 0; tt < 4; ++tt) frag_decode_word(i == 0 ? q[tt].x : q[tt].y, v[tt], decode_low);
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // a_j: row dg (j even) or dg + 8, k 2t.. (j < 2) or 8 + 2t..
          uint4 chunk;
          if (j % 2 == 0)
            chunk = make_uint4(ptx::mul_bf16x2_low(v[0][j], s[0]), ptx::mul_bf16x2_low(v[1][j], s[1]),
                               ptx::mul_bf16x2_low(v[2][j], s[2]), ptx::mul_bf16x2_low(v[3][j], s[3]));
          else
            chunk = make_uint4(ptx::mul_bf16x2_high(v[0][j], s[0]), ptx::mul_bf16x2_high(v[1][j], s[1]),
                               ptx::mul_bf16x2_high(v[2][j], s[2]), ptx::mul_bf16x2_high(v[3][j], s[3]));
          *reinterpret_cast<uint4*>(a_buf + d_row + (j % 2) * kSwizzleAtom + (d_x ^ (2 * i + j / 2)) * 16) = chunk;
        }
      }
    };

    // The loads: each producer thread copies the same places of every stage.
    // B: chunk cb (k 8cb..8cb+7 of the k-block) of tokens jb + 32i.
    constexpr int kBChunks = kTok * 8 / kWsProducerThreads;
    const int jb = ptid / 8, cb = ptid % 8;
    const int b_dst = jb * 128 + sm80::a_bf16_swizzle(jb, cb);  // (jb + 32i) % 8 = jb % 8: + i * 32 * 128
    // Weights: lane slot sl = ch % 32 of fragment row ch / 32, ch = ptid + i * 256.
    constexpr int kWChunks = kBlocksPerCta * 32 / kWsProducerThreads;
    int w_dst[kWChunks];
#pragma unroll
    for (int i = 0; i < kWChunks; ++i) {
      const int ch = ptid + i * kWsProducerThreads, blk = ch / 32, sl = ch % 32;
      w_dst[i] = T::kBBytes + blk * (kFragWords * 4) + ((sl % 4) * 8 + sl / 4) * 16;  // [t][g]
    }
    // Scales: 16-byte part s_part of fragment row s_blk's sb bytes (the first sb threads).
    const int s_blk = ptid / (sb / 16), s_part = ptid % (sb / 16);
    const int s_dst = T::kBBytes + T::kWBytes + s_blk * 64 + s_part * 16;

    uint32_t it = 0;  // the CTA's k-blocks so far
    int n = 0;        // the CTA's units so far
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x, ++n) {
      const int64_t slot = u / row_tiles;
      const int nb0 = int(u % row_tiles) * kBlocksPerCta;
      const int e =
          tables.template produce<kWsProducerThreads>(n, slot, p.rows, p.a_gather, w.num_experts, p.span, p.cut, ptid);
      if (e < 0) return;  // past the real work; later units are too (the consumers see it too)

      // Sources of k-block 0 (+ a per-k-block stride).
      const uint8_t* b_src[kBChunks];
      const uint32_t b_rows = b_sources<kBChunks, 32>(tables.arow[n % 2], jb, cb, p.a_bf16, K, b_src);
      // (gemm_internal.hpp frag_block: a fragment row's next k-block is kFragGroup blocks on.)
      const uint8_t* expert_q =
          reinterpret_cast<const uint8_t*>(w.q) + frag_block(e, 0, 0, w.groups, KB) * (kFragWords * 4);
      uint32_t w_row[kWChunks];  // byte offset of the slot in the expert's k-block-0 fragment blocks, ~0u past N
#pragma unroll
      for (int i = 0; i < kWChunks; ++i) {
        const int ch = ptid + i * kWsProducerThreads, blk = ch / 32, sl = ch % 32;
        w_row[i] = nb0 + blk < NB ? uint32_t(frag_block(0, nb0 + blk, 0, w.groups, KB)) * uint32_t(kFragWords * 4) +
                                        uint32_t(sl) * 16u
                                  : ~0u;
      }
      const bool s_on = s_blk < kBlocksPerCta && nb0 + s_blk < NB;
      const uint8_t* s_src = w.scale + frag_block(e, nb0 + s_blk, 0, w.groups, KB) * sb + s_part * 16;
      d_ok = nb0 + fd < NB;

      // Stage of the CTA's k-block itl <- k-block kb of the slot; then the arrival on full.
      auto load = [&](uint32_t itl, int kb) {
        const int s = int(itl % kStages);
        ptx::mbarrier_wait_parity(addr(&empty_bar[s]), ((itl / kStages) & 1) ^ 1);
        uint8_t* st = stages + s * T::kStageBytes;
        b_copies<kBChunks, 32>(st, b_dst, b_src, b_rows, kb, cb, K);
#pragma unroll
        for (int i = 0; i < kWChunks; ++i)
          if (w_row[i] != ~0u)
            ptx::cp_async_16(st + w_dst[i], expert_q + w_row[i] + kb * (kFragGroup * kFragWords * 4), true);
        if (s_on) ptx::cp_async_16(st + s_dst, s_src + kb * (kFragGroup * sb), true);
        ptx::cp_async_mbarrier_arrive_noinc(addr(&full_bar[s]));
      };

      for (int kb = 0; kb < kPrefetch && kb < KB; ++kb) load(it + kb, kb);
      for (int kb = 0; kb < KB; ++kb, ++it) {
        if (kb + kPrefetch < KB) load(it + kPrefetch, kb + kPrefetch);
        const int s = int(it % kStages), a = int(it % kWsABufs);
        ptx::mbarrier_wait_parity(addr(&full_bar[s]), (it / kStages) & 1);                // k-block it landed
        ptx::mbarrier_wait_parity(addr(&a_empty_bar[a][c]), ((it / kWsABufs) & 1) ^ 1);  // A half free
        decode(stages + s * T::kStageBytes, a_bufs + a * kATileBytes);
        ptx::fence_proxy_async_shared();  // this thread's A writes -> the consumers' wgmma
        ptx::mbarrier_arrive(addr(&a_full_bar[a][c]));
        ptx::mbarrier_arrive(addr(&empty_bar[s]));  // its weights and scales are read
      }
    }
  } else {
    // ================= consumers: SS wgmma of their two m-tiles, then the epilogue =================
    if constexpr (T::kConsumerRegs > 0) ptx::setmaxnreg_inc<T::kConsumerRegs>();
    const int c = wg;
    const int g = lane / 4, t = lane % 4;
    const int fb = c * 8 + 2 * wl;  // the warp's fragment rows in the CTA: fb (m-tile 0), fb + 1 (m-tile 1)
    // Descriptors of A buffer 0's m-tile 2c and stage 0's B tile. The start address field
    // (bits 0-13, address >> 4) never carries into the next field (shared addresses < 2^18),
    // so other buffers, stages, m-tiles and k-steps add (byte offset >> 4).
    const uint64_t desc_a = ptx::wgmma_desc_kmajor_sw128(raw + pad + uint32_t(c * 2 * kMTileBytes));
    const uint64_t desc_b = ptx::wgmma_desc_kmajor_sw128(raw + pad + uint32_t(kWsABufs * kATileBytes));
    auto release = [&](uint32_t itr) {  // k-block itr's wgmma group is complete
      ptx::mbarrier_arrive(addr(&empty_bar[itr % kStages]));
      ptx::mbarrier_arrive(addr(&a_empty_bar[itr % kWsABufs][c]));
    };

    uint32_t it = 0;
    int n = 0;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x, ++n) {
      const int nb0 = int(u % row_tiles) * kBlocksPerCta;
      const int e = tables.consume(n);
      if (e < 0) return;

      // acc[mt][nt][c]: m-tile mt (fragment row fb + mt), tokens nt*8 + 2t + c%2, rows g (c < 2), g+8
      float acc[2][NT][4];
      sm80::zero_acc<NT, true>(acc);  // zeroed before the first wgmma_fence
      for (int kb = 0; kb < KB; ++kb, ++it) {
        const int s = int(it % kStages), a = int(it % kWsABufs);
        ptx::mbarrier_wait_parity(addr(&full_bar[s]), (it / kStages) & 1);        // B of k-block it landed
        ptx::mbarrier_wait_parity(addr(&a_full_bar[a][c]), (it / kWsABufs) & 1);  // its A is decoded
        ptx::fence_proxy_async_shared();  // the producers' cp.async B data -> this thread's wgmma
        const uint64_t da = desc_a + uint64_t(a * kATileBytes / 16);
        const uint64_t db = desc_b + uint64_t(s * T::kStageBytes / 16);
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)  // k-step kk: bytes 32kk..32kk+31 of every row (the hardware swizzles the full address)
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
            ptx::wgmma_m64k16_bf16_ss<NT>(acc[mt], da + uint64_t((mt * kMTileBytes + 32 * kk) / 16),
                                          db + uint64_t(32 * kk / 16));
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();  // k-block it - 1's group is complete: its stage and A half are free
        if (kb > 0) release(it - 1);
      }
      ptx::wgmma_wait_group<0>();
      sm80::fence_acc(acc);  // read only after the wait
      if (KB > 0) release(it - 1);

      // ---- epilogue: the fast path's, on the warp's fragment rows nbw, nbw + 1 ----
      const int nbw = nb0 + fb;  // even
      if (nbw < NB) {            // NB is even for GEMM 1, so both m-tiles are real there
        const volatile int64_t* orow = tables.orow[n % 2];  // read at each use (registers: see the RS kernel)
        epilogue<NT, GEMM1>(p, e, nbw, g, acc, [&](int nt, int c) -> int64_t { return orow[nt * 8 + 2 * t + c]; });
      }
      tables.release(n);
    }
  }
#endif  // FP4MOE_SM90A
}

// ===========================================================================
// The RS kernel with warp-specialized loads (FP4MOE_SM90_KERNEL=rsws)
// ===========================================================================
//
// Why: the SS kernel above moves every decoded weight through shared memory: at 128 tokens
// its wgmma read 6 KiB per m64n128k16 (A 2 KiB, B 4 KiB, 64 cycles at peak: 96 B/cycle), the
// decode writes 32 B/cycle more and the loads 32: about the 128 B per cycle an SM's shared
// memory gives. With A from registers the wgmma read only B (64 B/cycle); what kept the RS
// kernel at ~40% was its schedule (a CTA barrier per k-block, one or two wgmma in flight,
// each warp issuing its own loads). Here:
//   - 3 warpgroups: 0 and 1 consume (as in the RS kernel: warp wl of warpgroup c owns
//     fragment rows fb = c*8 + 2*wl, fb + 1, decodes their A fragments into registers and
//     issues the m64nNk16 RS wgmma; the same accumulators and epilogues); 2 produces (every
//     cp.async of every stage: B rows gathered through a_gather, fragment blocks, scales).
//   - Per k-block a consumer warpgroup decodes all its A (4 k-steps x 2 m-tiles, 32 registers),
//     issues the 8 wgmma as one commit group and keeps it in flight while it decodes the next
//     k-block into a second register set. 224 registers per consumer thread (setmaxnreg; the
//     producers keep 56). (Groups per k-step with 3 in flight: ptxas serializes the wgmma,
//     C7513, at this loop.)
//   - Persistent as the SS kernel (grid = SMs, (slot, row tile) units, row tables double
//     buffered), with a ring of stages (RsWsTile): 7 of one k-block (25 KiB) at 128 tokens,
//     6 of two k-blocks (34 KiB) in rsws4. The producers run as far ahead as the ring allows,
//     across units. A unit of odd KB has its first k-block in a stage of its own.
//
// Barriers (mbarriers; per stage fill, alike in both roles):
//   full[s]   128 arrivals, one per producer thread once its copies of the stage have landed:
//             at 2 consumer warpgroups its mbarrier.arrive after cp.async.wait_group and its
//             fence.proxy.async (kPFence below), in rsws4 its cp.async.mbarrier.arrive.noinc
//   empty[s]  256 (512 in rsws4): every consumer thread once per fill, once the wgmma groups
//             that read the stage's B are complete (after the wait_group of the next stage's
//             first group, or at the unit's end) and its own reads of the weights and scales
//             are done
//   tables.full[b] / tables.empty[b] 128 / 256 (512): row tables set b, as in the SS kernel
// Race freedom, as argued at the SS kernel: the producers refill stage s (fill f) only after
// empty[s] phase f - 1; the consumers read it (their weight loads, the wgmma's B) only after
// full[s] phase f, and fence.proxy.async makes the cp.async data visible to wgmma (the producer
// thread's own, before its arrival, at 2 consumer warpgroups; each consumer thread's, after its
// wait, in rsws4); a[kk] is
// rewritten only after the group that read it completed (wait_group); the row tables as in
// the SS kernel. Neither role can be two phases behind on a barrier: each phase needs the
// waiter's own arrivals of the phase before.
//
// The wide variant (rsws4, the default at 64-token tiles): 4 consumer warpgroups of one m-tile
// per warp (warp wl of warpgroup c owns fragment row c*4 + wl; 4 wgmma per k-block and
// warpgroup) and the same producer warpgroup, 640 threads: twice the decoding warps for the
// same CTA tile and stages, each with half the decode per k-block. Why: at 64 tokens a
// k-block's MMA is half that of a 128-token tile for the same decode, and the consumers'
// decode bound the kernel (ncu, kimi-k2 shapes: producer waiting for free stages 47% of its
// time; consumers issuing 0.21 instructions per cycle each, 2 per SM sub-partition). On the
// H200, kimi-k2 T = 2048 / 8192: 5,895 / 15,448 us against 6,131 / 15,997 (notes v6). With
// 2 producer warps instead (576 threads) it was 15% slower than rsws: the producer bound it.
// No setmaxnreg: the launch's 96 registers per thread (20 warps, 5 per SM sub-partition's
// 64 KiB register file) hold the consumers' 32 accumulators and two A sets without spills.
//
// A position in a ring of kStages pipeline stages, carried from stage to stage: stage s and the
// parity of its current fill (for the CTA's fill f: f % kStages and f / kStages % 2; kStages is
// not a power of two, and those divisions cost ~8 instructions per fill).
template <int kStages>
struct RingPos {
  int s = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void next() {
    if (++s == kStages) {
      s = 0;
      phase ^= 1u;
    }
  }
};

// The rsws kernels' TMA descriptors of one weight matrix (encode_weight_maps), passed as a
// __grid_constant__ parameter: the fragment words as {128 words of a fragment block, k-block,
// fragment row, expert} and the scale bytes as {sb, k-block, fragment row, expert}, each with a
// box of one k-block of kBlocksPerCta fragment rows (rows past N out of bounds: zeros).
}  // namespace

namespace sm90_detail {
struct WeightMaps {
  CUtensorMap q;
  CUtensorMap s;
};
}  // namespace sm90_detail

namespace {

// Roles of a kernel with kCw consumer warpgroups (2 or 4).
template <int kCw>
struct RsRoles {
  static constexpr int kConsumerThreads = kCw * 128;
  static constexpr int kProducerThreads = 128;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  static constexpr int kMt = 4 / kCw;  // m-tiles (fragment rows) per consumer warp
  // setmaxnreg (a whole producer warpgroup only): the consumers take what the producer gives.
  static constexpr bool kSetMaxNReg = kCw == 2;
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;
  static constexpr int kLaunchRegs = 168;  // 65536 / 384, rounded down to a multiple of 8
  static_assert(kCw == 2 || kCw == 4, "2 or 4 consumer warpgroups");
  static_assert(kCw * 4 * kMt == kBlocksPerCta, "the consumer warps cover the CTA's fragment rows");
  static_assert(!kSetMaxNReg ||
                    kProducerRegs * kProducerThreads + kConsumerRegs * kConsumerThreads <= kLaunchRegs * kThreads,
                "the registers the roles ask for must be the ones the CTA got at launch");
};

// The rsws kernels' ring: a stage holds kKbs consecutive k-blocks of one unit, each in
// StageLayout's [B tile][fragment blocks][scales] (k-block j of a stage at j * kBlockBytes), under
// one full and one empty barrier. rsws4 (kCw = 4) takes two: the consumers' fixed cost of a
// stage (the barrier wait, the proxy fence, the release, the stage's addresses and descriptor:
// 26 of its 219 SASS instructions per two k-blocks) is paid once per two k-blocks, with the
// same warps and registers. rsws (kCw = 2, 128-token tiles) keeps one: its ring of two-k-block
// stages (4 of 50 KiB) measured 4.0-4.6% slower at kimi-k2 T = 16384 and qwen3-235b T = 8192
// (notes v56), the consumers holding two stages, so that the producer ran 4 k-blocks ahead
// instead of 6.
template <int NT, int kCw>
struct RsWsTile : StageLayout<NT> {
  using S = StageLayout<NT>;
  using S::kTok;
  using R = RsRoles<kCw>;
  static constexpr int kKbs = kCw == 4 ? 2 : 1;             // k-blocks per stage
  static constexpr int kBlockBytes = S::kStageBytes;         // one k-block's B tile, weights, scales
  static constexpr int kStageBytes = kKbs * kBlockBytes;
  static constexpr int kTableBytes = 2 * 2 * kTok * 8 + 2 * 2 * 4;
  // rsws's ring one stage short of what fits: at 128-token tiles 7 stages of 25 KiB against 8
  // measured 0.3-0.5% faster on the H200 (notes v62: kimi-k2 / qwen3-235b T = 16384, qwen3-30b /
  // deepseek-v3 T = 8192; 6 stages -1.2 to +0.7%), the producer 5 k-blocks ahead instead of 6.
  static constexpr int kRingShort = kCw == 2 ? 1 : 0;
  static constexpr int kStages =
      (kSmemPerCta - kTableBytes - kWsBarrierBytes - kSwizzleAtom) / kStageBytes - kRingShort;
  static constexpr int kSmem = kSwizzleAtom + kStages * kStageBytes;
  static constexpr int kBStep = R::kProducerThreads / 8;            // tokens between a thread's B chunks
  static constexpr int kBChunks = kTok * 8 / R::kProducerThreads;  // B chunks per producer thread and k-block
  static_assert(kBStep * kBChunks == kTok, "the B chunks of a k-block cover its tokens");
  static_assert(kBlockBytes % kSwizzleAtom == 0, "every B tile must start 1024-byte aligned");
  static_assert((2 * kStages + 4) * 8 <= kWsBarrierBytes, "the mbarriers must fit their reserved bytes");
  static_assert(kSmem + kTableBytes + kWsBarrierBytes <= kSmemPerCta, "one CTA's shared memory must fit");
  // The consumers hold two stages (the one they read, the one before until its last group
  // completes): the producer fills the others, at least 4 k-blocks ahead.
  static_assert((kStages - 2) * kKbs >= 4, "keep the loads several k-blocks ahead");
  static_assert(kKbs == 1 || kKbs == 2, "the consumers' loop takes two k-blocks a trip");
  static_assert((kTok * 8) % R::kProducerThreads == 0, "the B tile's chunks must divide evenly over the producers");
  static_assert(kTok <= R::kProducerThreads, "one producer thread per token row fills the row tables");
};

// The ring of an rsws kernel of tile NT at wgmma width NU: the narrower widths (NU < NT: rsws4's
// width split, rsws's wide widths) size their B tiles by NU, rounded up to an even count of n8
// tiles (a k-block's B chunks split evenly over the 128 producers), where the tile's tokens left
// part of each stage unread: the ring gets the bytes as stages. rsws4 (stages of two k-blocks):
// width 6 (48 tokens) 7 stages for 6, width 4 8, width 2 10; rsws (one k-block, one stage
// short: kRingShort): width 10 10 for 7, 12 9, 14 8. Such a launch's tiles hold at most 8 * NU
// rows (SpanCut::limit), so its row tables need no more.
template <int NT, int kCw, int NU>
using RsWsTileOf = RsWsTile<NU < NT ? NU + NU % 2 : NT, kCw>;

// MX: the weights' scales are MX exponents (w.block == 32), known at compile time: the scale
// selection of every k-block then folds to constants (at run time it was ~25 instructions
// per k-block and warp, which ptxas recomputed rather than keep in registers).
//
// NU: the width of the consumers' wgmma (m64n{8 NU}k16), NT but in the width split's narrow
// launches (Sm90Config::narrow_width) and the split's wide-width launch (Sm90Config::wide_width),
// whose tiles have at most 8 NU rows: B's first 8 NU token rows, the accumulators and the
// epilogue of those. The producer fills the whole B tile as ever.
template <int NT, bool GEMM1, int kCw, bool MX, int NU = NT>
__global__ void __launch_bounds__(RsRoles<kCw>::kThreads, 1)
    sm90_rsws_gemm(const Params p, const __grid_constant__ WeightMaps maps) {
  static_assert(NU >= 1 && NU <= NT, "the wgmma width is at most the tile's");
#if defined(FP4MOE_SM90A)
  using T = RsWsTileOf<NT, kCw, NU>;
  using R = RsRoles<kCw>;
  constexpr int kTok = T::kTok, kStages = T::kStages, kMt = R::kMt;
  // kPFence: the producers make their B copies visible to the async proxy themselves (each
  // thread's cp.async.wait_group, fence.proxy.async, then its arrival on full[s]), so that the
  // consumers' k-blocks have no fence (SASS: 6 instructions fewer, a MEMBAR among them). On the
  // H200 (notes v45) at 128-token tiles: kimi-k2 T = 16384 -2.0%, qwen3-235b T = 8192 / 16384
  // -1.0 / -1.1%, qwen3-30b T = 8192 -1.3%, gpt-oss-120b / deepseek-v3 T = 8192 -0.7 / -0.5%,
  // qwen3-30b T = 2048 +0.5%; in rsws4 (one producer warpgroup for four consumer warpgroups,
  // the producer's waits cost more than the consumers save) +1.3 to +4.6% at T = 512-2048.
  constexpr bool kPFence = kCw == 2;
  extern __shared__ uint8_t smem_raw[];
  __shared__ UnitTables<kTok> tables;
  __shared__ uint64_t full_bar[kStages], empty_bar[kStages];
  // The consumers' loop-invariant shared addresses (the stages, full[0], empty[0]) and stage 0's
  // B descriptor, which they read from here once, their k loop's loads then taking 32-bit
  // shared addresses: computed in place (and the loads through generic pointers), ptxas
  // recomputed them from the CTA's cluster id (S2UR) in every trip of the k loop. SASS per
  // two k-blocks (consumer loop): rsws4 GEMM 1 NVFP4 193 -> 176 instructions, GEMM 2 206 -> 183,
  // MX GEMM 1 186 -> 171; rsws 339 -> 329; no spills, registers as many or fewer but in one
  // instantiation (+1), 32 bytes more static shared memory.
  // Likewise rsws4's three decode constants (the table's low bytes, the scale's multiplier, the
  // selectors' high-table bits), which ptxas rebuilt in every trip (from threadIdx.x & w.zero,
  // or as a literal) rather than keep: read once through volatile loads, they stay in
  // registers. SASS per two k-blocks: rsws4 GEMM 1 NVFP4 176 -> 172, GEMM 2 183 -> 172 (NU 6-8;
  // 185 -> 181 below), MX 171 -> 166 / 175 -> 166; registers at most 94 of the launch's 96, no
  // spills.
  __shared__ uint32_t consts[6];
  __shared__ uint64_t consts_desc;
  auto addr = [](const void* q) { return uint32_t(__cvta_generic_to_shared(q)); };

  const uint32_t raw = addr(smem_raw);
  const uint32_t pad = (kSwizzleAtom - raw % kSwizzleAtom) % kSwizzleAtom;
  uint8_t* const stages = smem_raw + pad;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(addr(&full_bar[s]), R::kProducerThreads);
      ptx::mbarrier_init(addr(&empty_bar[s]), R::kConsumerThreads);
    }
    consts[0] = raw + pad;
    consts[1] = addr(&full_bar[0]);
    consts[2] = addr(&empty_bar[0]);
    consts[3] = kFragDecodeLow;
    consts[4] = 16u;
    consts[5] = kFragHighTable;
    consts_desc = ptx::wgmma_desc_kmajor_sw128(raw + pad);
    tables.init(R::kProducerThreads, R::kConsumerThreads);
    ptx::fence_proxy_async_shared();  // the initialized barriers, visible to the bulk copies' complete_tx
  }
  __syncthreads();  // the barriers' initialization, visible to all
  // A split's launches after its first run as programmatic dependents (launch_split): this grid
  // lets the next launch start at once, so that its CTAs take the SMs this grid's CTAs leave;
  // and thread 0 waits at its end for the grid before, so that this grid completes after that
  // one (the kernel after the split, launched normally, then sees every launch's rows). The
  // launches read only what was complete before the first began, and write disjoint rows. Both
  // immediate when launched normally.
  ptx::grid_dependency_trigger();
  struct WaitAtEnd {
    __device__ ~WaitAtEnd() {
      if (threadIdx.x == 0) ptx::grid_dependency_wait();
    }
  } wait_at_end;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = __shfl_sync(0xFFFFFFFFu, warp / 4, 0), wl = warp % 4;  // warp-uniform
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows;
  const int K = b_row_k(w);
  constexpr bool mx = MX;
  constexpr int sb = frag_scale_bytes(MX ? kMxfp4Block : kNvfp4Block);  // MX is w.block == kMxfp4Block (launch_rsws)
  const int row_tiles = (NB + kBlocksPerCta - 1) / kBlocksPerCta;
  const int64_t units = p.tiles * row_tiles;
  const uint32_t full0 = addr(&full_bar[0]), empty0 = addr(&empty_bar[0]);  // stage s's: + 8 s

  if (wg == kCw) {
    // ================= producer: every copy of every stage =================
    if constexpr (R::kSetMaxNReg) ptx::setmaxnreg_dec<R::kProducerRegs>();
    const int ptid = int(threadIdx.x) - R::kConsumerThreads;
    // B: chunk cb (k 8cb..8cb+7 of the k-block) of tokens jb + kBStep i; (jb + kBStep i) % 8 = jb % 8.
    const int jb = ptid / 8, cb = ptid % 8;
    const int b_dst = jb * 128 + sm80::a_bf16_swizzle(jb, cb);
    // Weights and scales: producer thread 0 brings a k-block's kBlocksPerCta fragment rows
    // (512 bytes each, in the global layout's order: load_weight_frag reads slot `lane` at
    // lane * 16) and their sb scale bytes each as two TMA boxes (WeightMaps).
    const uint32_t stages_addr = addr(stages);
    constexpr uint32_t kTx = uint32_t(T::kWBytes + kBlocksPerCta * sb);  // both boxes' bytes

    RingPos<kStages> pos;  // the stage of the CTA's next k-block, and the parity of its fill
    // kPFence only: the fills whose B copies this thread has not announced yet on full[],
    // `pending` of them, the oldest at ring position `ann`. A fill is announced once its copies
    // have landed (cp.async.wait_group) and this thread's proxy fence made them visible to the
    // async proxy, which the consumers' wgmma read B through: so the consumers need no fence of
    // their own. At most kLag fills stay unannounced after a fill; all are announced before this
    // thread waits for anything (a free stage, the row tables) or leaves. (kLag 2 is the one
    // value measured.)
    constexpr int kLag = 2;
    RingPos<kStages> ann;
    int pending = 0;
    auto announce_all = [&] {
      if (pending == 0) return;
      ptx::cp_async_wait_group<0>();
      ptx::fence_proxy_async_shared();
      for (; pending > 0; --pending) {
        ptx::mbarrier_arrive(full0 + 8 * ann.s);
        ann.next();
      }
    };
    auto announce_old = [&] {
      if (pending <= kLag) return;
      ptx::cp_async_wait_group<kLag>();
      ptx::fence_proxy_async_shared();
      ptx::mbarrier_arrive(full0 + 8 * ann.s);
      ann.next();
      --pending;
    };
    // The end of this thread's fill of stage s: its arrival on full[s], made when the copies
    // land (or, kPFence, the fill's cp.async group, announced later).
    auto end_fill = [&](int s) {
      if constexpr (kPFence) {
        ptx::cp_async_commit_group();
        ++pending;
        announce_old();
      } else {
        ptx::cp_async_mbarrier_arrive_noinc(full0 + 8 * s);
      }
    };
    // Whether stage q is free (one probe), and the wait until it is, given a probe's answer
    // (announcing first, kPFence, what this thread still owes).
    auto is_free = [&](const RingPos<kStages>& q) {
      return ptx::mbarrier_try_wait_parity(empty0 + 8 * q.s, q.phase ^ 1);
    };
    auto wait_free = [&](const RingPos<kStages>& q, bool done) {
      if constexpr (kPFence)
        if (!done) announce_all();
      while (!done) done = is_free(q);
    };
    int n = 0;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x, ++n) {
      const int64_t slot = u / row_tiles;
      const int nb0 = int(u % row_tiles) * kBlocksPerCta;
      if constexpr (kPFence) announce_all();
      const int e =
          tables.template produce<R::kProducerThreads, kCw == 4>(n, slot, p.rows, p.a_gather, w.num_experts, p.span,
                                                                 p.cut, ptid);
      if (e < 0) return;  // past the real work; later units are too (the consumers see it too)

      // Each copy's source at k-block kb, as pointers moved on two k-blocks per step (the second
      // at an immediate offset). B rows past the expert's rows point at a real row and copy zero
      // bytes (zero-fill, no read), fixed for the unit. B chunks past K (in the last k-block,
      // when K % 64 != 0) are zeros too: the weights there are zero codes. Fragment rows past N
      // are out of the maps' bounds: TMA fills them with zeros.
      const uint8_t* b_ptr[T::kBChunks];
      const uint32_t b_rows = b_sources<T::kBChunks, T::kBStep>(tables.arow[n % 2], jb, cb, p.a_bf16, K, b_ptr);
      const bool b_last_in_k = (KB - 1) * kFragK + cb * 8 < K;  // chunk cb of the last k-block is below K
      int kb_w = 0;  // the k-block of the pointers (the weights' TMA coordinate)
      // Stage s <- the kbs k-blocks from the pointers' k-block + j0 on, then the arrival that
      // announces them: per k-block, its B chunks and thread 0's two TMA boxes, whose bytes its
      // expect_tx, issued before its own arrival, keeps the phase open for. last: the last of
      // them is the unit's last k-block.
      auto fill = [&](int s, int j0, int kbs, bool last) {
        uint8_t* const st = stages + s * T::kStageBytes;
        const uint32_t bar = full0 + 8 * s, st_addr = stages_addr + uint32_t(s * T::kStageBytes);
        if (ptid == 0) ptx::mbarrier_expect_tx(bar, uint32_t(kbs) * kTx);
#pragma unroll
        for (int j = 0; j < T::kKbs; ++j) {
          if (j >= kbs) break;
          const int off = (j0 + j) * (kFragK * 2);
          const bool in_k = !(last && j == kbs - 1) || b_last_in_k;
#pragma unroll
          for (int i = 0; i < T::kBChunks; ++i)
            ptx::cp_async_16(st + j * T::kBlockBytes + b_dst + i * T::kBStep * 128,
                             in_k ? b_ptr[i] + off : b_ptr[i] - kb_w * (kFragK * 2),
                             in_k && (b_rows >> i) % 2 != 0);
          if (ptid == 0) {
            const uint32_t w_addr = st_addr + uint32_t(j * T::kBlockBytes + T::kBBytes);
            ptx::tma_load_5d(w_addr, &maps.q, 0, 0, kb_w + j0 + j, nb0 / kFragGroup, e, bar);
            ptx::tma_load_5d(w_addr + T::kWBytes, &maps.s, 0, 0, kb_w + j0 + j, nb0 / kFragGroup, e, bar);
          }
        }
        end_fill(s);
      };
      auto advance = [&](int kbs) {
#pragma unroll
        for (int i = 0; i < T::kBChunks; ++i) b_ptr[i] += kbs * (kFragK * 2);
        kb_w += kbs;
      };
      // The next stage, once free <- the pointers' next kbs k-blocks.
      auto fill_next = [&](int kbs, bool last) {
        wait_free(pos, is_free(pos));
        fill(pos.s, 0, kbs, last);
        pos.next();
      };
      // The next two k-blocks: one stage (kKbs 2) or two, both free-stage checks issued before
      // either answer is needed.
      auto two = [&](bool last) {
        if constexpr (T::kKbs == 2) {
          fill_next(2, last);
        } else {
          RingPos<kStages> pos1 = pos;
          pos1.next();
          const bool free0 = is_free(pos), free1 = is_free(pos1);
          wait_free(pos, free0);
          fill(pos.s, 0, 1, false);
          wait_free(pos1, free1);
          fill(pos1.s, 1, 1, last);
          pos = pos1;
          pos.next();
        }
        advance(2);
      };
      // An odd KB's first k-block fills a stage alone (the consumers' loop, too, takes it
      // alone); then two k-blocks a step, the last step apart (its B chunks past K).
      if (KB % 2 != 0) {
        fill_next(1, KB == 1);
        advance(1);
      }
      int kb = KB % 2;
      for (; kb + 2 < KB; kb += 2) two(false);
      if (kb < KB) two(true);
    }
    if constexpr (kPFence) announce_all();
  } else {
    // ================= consumers: decode A into registers, RS wgmma, the epilogue =================
    if constexpr (R::kSetMaxNReg) ptx::setmaxnreg_inc<R::kConsumerRegs>();
    const int c = wg;
    const int g = lane / 4, t = lane % 4;
    const int s_off = sm80::scale_word_offset(g, t, sb), s_byte = sm80::scale_word_byte(t, mx);
    const int fb = (c * 4 + wl) * kMt;  // the warp's fragment rows in the CTA: fb + mt for m-tile mt
    const uint64_t desc_b = consts_desc;  // stage 0's B tile (+ offset >> 4)
    const uint32_t stages_c = consts[0], full0_c = consts[1], empty0_c = consts[2];
    // The decode's constants: rsws4's from consts (registers), rsws's as before (the decode
    // table through ptx::per_thread, the multiplier and the high-table bits as literals): with
    // all three in registers its 128-token k loop grew by ~45 instructions (MOVs) and spilled.
    // rsws4's multiplier is an IMAD, not a LEA (rsws at 128 tokens spilled with it).
    const uint32_t decode_low_c = kCw == 4 ? ptx::ld_shared_u32(addr(&consts[3])) : sm80::decode_table(w);
    const uint32_t mul16_c = kCw == 4 ? ptx::ld_shared_u32(addr(&consts[4])) : 16u;
    const uint32_t high_table_c = kCw == 4 ? ptx::ld_shared_u32(addr(&consts[5])) : kFragHighTable;

    RingPos<kStages> pos;  // the stage of the CTA's next k-blocks, and the parity of its fill
    int last_s = 0;        // the stage before (released once its last group completes)
    int n = 0;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x, ++n) {
      const int nb0 = int(u % row_tiles) * kBlocksPerCta;
      const int e = tables.consume(n);
      if (e < 0) return;
      // acc[mt][nt][c]: m-tile mt (fragment row fb + mt), tokens nt*8 + 2t + c%2, rows g (c < 2), g+8
      float acc[kMt][NU][4];
      sm80::zero_acc<NU, true>(acc);  // zeroed before the first wgmma_fence
      // The wait for stage pos.s: its k-blocks landed.
      auto stage_wait = [&] {
        ptx::mbarrier_wait_parity(full0_c + 8 * pos.s, pos.phase);
        if constexpr (!kPFence)
          ptx::fence_proxy_async_shared();  // the producer's cp.async B data -> this thread's wgmma
      };
      // k-block j of stage s: decode its A into `a`, issue its 4 kMt
      // wgmma as one group, and wait for the group before (wait_group 1), which read the other A
      // set: the loop below alternates two register sets, so no register of a group in flight
      // is written (PTX: undefined behaviour, and ptxas keeps PTX registers apart only where
      // they differ). release: that group was the last of stage last_s, which this thread now
      // releases.
      auto k_block = [&](uint32_t (&a)[4][kMt][4], int s, int j, bool release) {
        const uint32_t st = stages_c + uint32_t(s * T::kStageBytes + j * T::kBlockBytes);
        const uint64_t db =  // 32-bit offsets (>> 4): ptxas keeps them off the 64-bit add
            desc_b + uint64_t(uint32_t(s) * uint32_t(T::kStageBytes / 16) + uint32_t(j * (T::kBlockBytes / 16)));
        // The words and the scale pair of the warp's fragment rows, once per k-block (zeros past
        // N: TMA filled them so). The scale box packs sb bytes per fragment row.
        uint4 wq[kMt];
        uint32_t sp[kMt];
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
          uint32_t ws;
          sm80::load_weight_frag(st + uint32_t(T::kBBytes + (fb + mt) * (kFragWords * 4)),
                                 st + uint32_t(T::kBBytes + T::kWBytes + (fb + mt) * sb), lane, s_off, wq[mt], ws);
          sp[mt] = sm80::scale_rows_bf16x2(ws, s_byte, mx, mul16_c);
        }
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) {
            sm80::weight_a_frag(a[kk][mt], wq[mt], sp[mt], kk, decode_low_c, high_table_c);
#pragma unroll
            for (int r = 0; r < 4; ++r) ptx::reg_fence(a[kk][mt][r]);
          }
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt)
            ptx::wgmma_m64k16_bf16_rs<NU>(acc[mt], a[kk][mt], db + uint64_t(2 * kk));  // (32 bytes) >> 4
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();  // the group before is complete: its A set (and stage) are free
        if (release) ptx::mbarrier_arrive(empty0_c + 8 * last_s);
      };
      // Past stage pos.s's last group: it becomes the stage to release, pos the next.
      auto leave_stage = [&] {
        last_s = pos.s;
        pos.next();
      };
      uint32_t a0[4][kMt][4], a1[4][kMt][4];  // [k-step][m-tile]: two A sets, used alternately
      // An odd KB's first k-block runs alone (set 1, a stage of its own); then two k-blocks a
      // trip, sets 0 and 1, of one stage (kKbs 2) or two: the loop has no branch between its
      // two sets, which ptxas needs to keep the wgmma asynchronous.
      int kb = 0;
      if (KB % 2 != 0) {
        stage_wait();
        k_block(a1, pos.s, 0, false);
        leave_stage();
        ++kb;
      }
      for (; kb < KB; kb += 2) {
        stage_wait();
        k_block(a0, pos.s, 0, kb > 0);
        if constexpr (T::kKbs == 2) {
          k_block(a1, pos.s, 1, false);
        } else {
          leave_stage();
          stage_wait();
          k_block(a1, pos.s, 0, true);
        }
        leave_stage();
      }
      ptx::wgmma_wait_group<0>();
      sm80::fence_acc(acc);  // read only after the wait
      if (KB > 0) ptx::mbarrier_arrive(empty0_c + 8 * last_s);

      const int nbw = nb0 + fb;  // even when kMt = 2
      if (nbw < NB) {
        const volatile int64_t* orow = tables.orow[n % 2];  // read at each use (registers: see the RS kernel)
        auto out_row = [&](int nt, int c) -> int64_t { return orow[nt * 8 + 2 * t + c]; };
        // GEMM 1: the activation of the format's presets (silu for NVFP4, swiglu_oai for MXFP4)
        // compiled apart, without the other's predicated instructions (SASS of the NVFP4 128-token
        // GEMM 1: ~22.5 instructions per value in the activation block against ~28); other
        // activations at run time. On the H200 (notes v29): qwen3-235b T = 16384 1.3% faster,
        // gpt-oss-120b T = 8192 / 16384 2.4 / 1.8%; at T = 512 (the narrow launches) 2.8-4.3%.
        constexpr int kPresetAct = GEMM1 ? int(MX ? Activation::swiglu_oai : Activation::silu) : -1;
        if (GEMM1 && p.epi.act == Activation(kPresetAct))
          epilogue<NU, GEMM1, kPresetAct>(p, e, nbw, g, acc, out_row);
        else
          epilogue<NU, GEMM1>(p, e, nbw, g, acc, out_row);
      }
      tables.release(n);
    }
  }
#endif  // FP4MOE_SM90A
}

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link to libcuda), or
// nullptr where the driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The WeightMaps of w (host only: no device call).
inline WeightMaps encode_weight_maps(const WeightMatrix& w) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) detail::fail(ErrorKind::device, "the CUDA driver has no cuTensorMapEncodeTiled (the rsws kernels' TMA)");
  // The layout's dims (gemm_internal.hpp frag_block), innermost first: a block's elements, the
  // group's fragment rows, k-blocks, groups, experts. A box: a k-block of kBlocksPerCta / 8
  // groups (those past the expert's last group arrive as zeros).
  const cuuint64_t KB = cuuint64_t(w.Kp / kFragK), NG = cuuint64_t(frag_groups(w.N)), E = cuuint64_t(w.num_experts);
  const cuuint64_t sb = cuuint64_t(frag_scale_bytes(w.block)), fb = kFragWords * 4, G = kFragGroup;
  static_assert(kBlocksPerCta % kFragGroup == 0, "a CTA's rows are whole groups of the layout");
  WeightMaps m{};
  auto one = [&](CUtensorMap* map, CUtensorMapDataType type, const void* base, cuuint64_t inner_elems,
                 cuuint64_t inner_bytes, const char* what) {
    const cuuint64_t dims[5] = {inner_elems, G, KB, NG, E};
    const cuuint64_t strides[4] = {inner_bytes, G * inner_bytes, KB * G * inner_bytes,
                                   NG * KB * G * inner_bytes};  // bytes, dims 1..4
    const cuuint32_t box[5] = {cuuint32_t(inner_elems), cuuint32_t(G), 1, cuuint32_t(kBlocksPerCta / kFragGroup), 1};
    const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
    const CUresult r = encode(map, type, 5, const_cast<void*>(base), dims, strides, box, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
      detail::fail(ErrorKind::device, std::string("cuTensorMapEncodeTiled (") + what + ") failed: CUresult " +
                                          std::to_string(int(r)));
  };
  one(&m.q, CU_TENSOR_MAP_DATA_TYPE_UINT32, w.q, fb / 4, fb, "weight words");
  one(&m.s, CU_TENSOR_MAP_DATA_TYPE_UINT8, w.scale, sb, sb, "weight scales");
  return m;
}

// An rsws kernel of NVFP4 or MX weights (at wgmma width NU); maps: encode_weight_maps(p.w),
// encoded once for all of a GEMM's launches. dependent: as the programmatic dependent of the
// launch before it (a split's later launches, split_pdl).
template <int NT, bool GEMM1, int kCw, int NU = NT>
void launch_rsws(dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream, bool dependent = false) {
  constexpr int kThreads = RsRoles<kCw>::kThreads, kSmem = RsWsTileOf<NT, kCw, NU>::kSmem;
  if (p.w.block == kMxfp4Block)
    launch_kernel(sm90_rsws_gemm<NT, GEMM1, kCw, true, NU>, grid, dim3(kThreads), kSmem, dependent, stream, p, maps);
  else
    launch_kernel(sm90_rsws_gemm<NT, GEMM1, kCw, false, NU>, grid, dim3(kThreads), kSmem, dependent, stream, p, maps);
}

// Whether a split's launches after the first run as programmatic dependents of the one before
// (FP4MOE_SM90_PDL=0: launched normally; read per GEMM, for A/B runs). The rsws kernels exist
// only as sm_90a code, which runs only on an sm_90 device: PDL-capable.
inline bool split_pdl() {
  return !env_switch("FP4MOE_SM90_PDL", '0');
}

// rsws4 at the width split's narrow width (kMinNarrowWidth..kMaxNarrowWidth): GEMM 1's in
// gemm_sm90_gemm1_widths.cu (launch_rsws4_narrow_gemm1), GEMM 2's here.
template <bool GEMM1>
void launch_rsws4_narrow_here(int width, dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream,
                              bool dependent) {
  static_assert(kMinNarrowWidth == 2 && kMaxNarrowWidth == 7, "one case per narrow width");
  switch (width) {
    case 2: return launch_rsws<8, GEMM1, 4, 2>(grid, p, maps, stream, dependent);
    case 3: return launch_rsws<8, GEMM1, 4, 3>(grid, p, maps, stream, dependent);
    case 4: return launch_rsws<8, GEMM1, 4, 4>(grid, p, maps, stream, dependent);
    case 5: return launch_rsws<8, GEMM1, 4, 5>(grid, p, maps, stream, dependent);
    case 6: return launch_rsws<8, GEMM1, 4, 6>(grid, p, maps, stream, dependent);
    default: return launch_rsws<8, GEMM1, 4, 7>(grid, p, maps, stream, dependent);
  }
}
template <bool GEMM1>
void launch_rsws4_narrow(int width, dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream,
                         bool dependent) {
  if constexpr (GEMM1) launch_rsws4_narrow_gemm1(width, grid, p, maps, stream, dependent);
  else launch_rsws4_narrow_here<false>(width, grid, p, maps, stream, dependent);
}

// rsws (128-token tiles) at the split's wide width (kWideWidths): GEMM 1's in
// gemm_sm90_gemm1_widths.cu (launch_rsws_wide_gemm1), GEMM 2's here.
template <bool GEMM1>
void launch_rsws_wide_here(int width, dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream,
                           bool dependent) {
  static_assert(std::size(kWideWidths) == 3 && kWideWidths[0] == 10 && kWideWidths[1] == 12 &&
                    kWideWidths[2] == 14,
                "one case per wide width");
  switch (width) {
    case 10: return launch_rsws<16, GEMM1, 2, 10>(grid, p, maps, stream, dependent);
    case 12: return launch_rsws<16, GEMM1, 2, 12>(grid, p, maps, stream, dependent);
    default: return launch_rsws<16, GEMM1, 2, 14>(grid, p, maps, stream, dependent);
  }
}
template <bool GEMM1>
void launch_rsws_wide(int width, dim3 grid, const Params& p, const WeightMaps& maps, cudaStream_t stream,
                      bool dependent) {
  if constexpr (GEMM1) launch_rsws_wide_gemm1(width, grid, p, maps, stream, dependent);
  else launch_rsws_wide_here<false>(width, grid, p, maps, stream, dependent);
}

// A persistent kernel's grid: one CTA per SM (what its shared memory allows), at most one per
// unit, walking the units.
inline dim3 persistent_grid(int64_t units, int device) {
  int64_t ctas = std::min<int64_t>(units, multiprocessor_count(device));
  if (const int limit = g_ws_grid_limit.load(std::memory_order_relaxed); limit > 0)
    ctas = std::min<int64_t>(ctas, limit);
  return dim3(unsigned(std::max<int64_t>(ctas, 1)));
}

// A width the config chose (`chosen`), unless a test forced one (`forced` > 0) or the
// environment turns the widths off (FP4MOE_SM90_WIDTHS=0: `none`; read per GEMM, for A/B runs).
inline int width_for(const std::atomic<int>& forced, int chosen, int none) {
  if (const int f = forced.load(std::memory_order_relaxed); f > 0) return f;
  return env_switch("FP4MOE_SM90_WIDTHS", '0') ? none : chosen;
}
// The width split's narrow width for config c (rsws4 unsplit, or the split), or 8 (none). Where
// the config splits widths, the environment's FP4MOE_SM90_NARROW=w (kMinNarrowWidth..
// kMaxNarrowWidth; read per GEMM, for A/B runs) replaces its narrow width.
inline int narrow_width_for(const Sm90Config& c) {
  const int w = width_for(g_narrow_width, c.narrow_width, 8);
  if (w == 8 || g_narrow_width.load(std::memory_order_relaxed) > 0) return w;
  const int e = env_int("FP4MOE_SM90_NARROW", 0);
  return e >= kMinNarrowWidth && e <= kMaxNarrowWidth ? e : w;
}
// The split's wide width for config c, or 16 (none).
inline int wide_width_for(const Sm90Config& c) { return width_for(g_wide_width, c.wide_width, 16); }
// The config's fold of rsws4's width split at narrow width `width`: fold_most(width) where it
// folds (a test may force the width), else 1.
inline int config_fold(const Sm90Config& c, int width) { return c.narrow_fold > 1 ? fold_most(width) : 1; }
// The fold that runs: config_fold, unless a test or the environment (FP4MOE_SM90_FOLD=f, read
// per GEMM, for A/B runs) forces one; at most fold_most.
inline int narrow_fold_for(const Sm90Config& c, int width) {
  int f = g_narrow_fold.load(std::memory_order_relaxed);
  if (f <= 0) f = env_int("FP4MOE_SM90_FOLD", 0);
  if (f <= 0) f = config_fold(c, width);
  return std::min(f, fold_most(width));
}

// The split (Sm90Config::split): the wide tiles on rsws, then the narrow ones on rsws4; with a
// width split (width < 8), those of at most 8 * width rows at that width, in a launch of their
// own; with a wide width (wide < 16), the last tiles of 65..8 wide rows on rsws at that width,
// in a launch of their own. The launches write disjoint rows; those after the first are
// programmatic dependents of the one before (split_pdl).
template <bool GEMM1>
void launch_split(const Sm90Config& c, int width, int wide, Params p, const WeightMaps& maps, int device,
                  cudaStream_t stream) {
  const bool pdl = split_pdl();
  p.span = TileSpan::wide;
  p.tiles = c.wide_tiles;
  p.cut = SpanCut{kSplitWideTile, wide < 16 ? 8 * wide : kSplitNarrowTile, 0};
  launch_rsws<kSplitWideTile / 8, GEMM1, 2>(persistent_grid(c.grid_x * c.wide_tiles, device), p, maps, stream);
  FP4MOE_CUDA_CHECK_LAUNCH();
  p.span = TileSpan::narrow;
  p.tiles = c.narrow_tiles;
  const dim3 narrow_grid = persistent_grid(c.grid_x * c.narrow_tiles, device);
  if (wide < 16) {
    p.cut = SpanCut{kSplitWideTile, 8 * wide, kSplitNarrowTile};
    launch_rsws_wide<GEMM1>(wide, narrow_grid, p, maps, stream, pdl);
    FP4MOE_CUDA_CHECK_LAUNCH();
    g_wide_width_launches.fetch_add(1, std::memory_order_relaxed);
  }
  p.cut = SpanCut{};
  if (width < 8) {
    p.cut = SpanCut{kSplitWideTile, 8 * width, 0};
    launch_rsws4_narrow<GEMM1>(width, narrow_grid, p, maps, stream, pdl);
    FP4MOE_CUDA_CHECK_LAUNCH();
    p.cut = SpanCut{kSplitWideTile, kSplitNarrowTile, 8 * width};
    g_width_split_launches.fetch_add(1, std::memory_order_relaxed);
  }
  launch_rsws<kSplitNarrowTile / 8, GEMM1, 4>(narrow_grid, p, maps, stream, pdl);
  FP4MOE_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);  // one GEMM
  g_rsws_launches.fetch_add(1, std::memory_order_relaxed);
  g_rsws4_launches.fetch_add(1, std::memory_order_relaxed);
}

// The width split (Sm90Config::narrow_width): the narrow last tiles at their width (folded:
// Sm90Config::narrow_fold), then the others at 64 tokens, both on rsws4. The two launches write
// disjoint rows; the second is the programmatic dependent of the first (split_pdl).
template <bool GEMM1>
void launch_width_split(const Sm90Config& c, int width, Params p, const WeightMaps& maps, int device,
                        cudaStream_t stream) {
  const int fold = narrow_fold_for(c, width);
  p.cut = SpanCut{64, 8 * width, 0, fold};
  p.span = TileSpan::narrow;
  p.tiles = fold > 1 ? c.folded_tiles : c.narrow_tiles;
  launch_rsws4_narrow<GEMM1>(width, persistent_grid(c.grid_x * p.tiles, device), p, maps, stream, false);
  FP4MOE_CUDA_CHECK_LAUNCH();
  p.span = TileSpan::wide;
  p.tiles = c.tiles;
  launch_rsws<8, GEMM1, 4>(persistent_grid(c.grid_x * c.tiles, device), p, maps, stream, split_pdl());
  FP4MOE_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);  // one GEMM
  g_rsws4_launches.fetch_add(1, std::memory_order_relaxed);
  g_width_split_launches.fetch_add(1, std::memory_order_relaxed);
  if (fold > 1) g_folded_launches.fetch_add(1, std::memory_order_relaxed);
}

// The listed instantiations: kernel {rs, ws, rsws} x token tile {64, 128} x {GEMM 1, GEMM 2}
// (rsws also x NVFP4 / MX, and rsws4 at 64 tokens, at 64 and at each narrow width).
template <bool GEMM1>
void launch(const Sm90Config& c, const Params& p, int device, cudaStream_t stream) {
  const Sm90Kernel kernel = sm90_kernel_for(c);
  if (kernel == Sm90Kernel::split)
    return launch_split<GEMM1>(c, narrow_width_for(c), wide_width_for(c), p, encode_weight_maps(p.w), device,
                               stream);
  if (kernel == Sm90Kernel::rs) {
    const dim3 grid(unsigned(c.grid_x), unsigned(c.grid_y));
    if (c.token_tile == 64) sm90_grouped_gemm<8, GEMM1><<<grid, kThreads, Tile<8>::kSmem, stream>>>(p);
    else sm90_grouped_gemm<16, GEMM1><<<grid, kThreads, Tile<16>::kSmem, stream>>>(p);
  } else {
    const dim3 grid = persistent_grid(c.grid_x * c.tiles, device);
    if (kernel == Sm90Kernel::ws) {
      if (c.token_tile == 64) sm90_ws_gemm<8, GEMM1><<<grid, kWsThreads, WsTile<8>::kSmem, stream>>>(p);
      else sm90_ws_gemm<16, GEMM1><<<grid, kWsThreads, WsTile<16>::kSmem, stream>>>(p);
    } else {
      const WeightMaps maps = encode_weight_maps(p.w);
      if (kernel == Sm90Kernel::rsws4) {
        if (const int width = narrow_width_for(c); width < 8)
          return launch_width_split<GEMM1>(c, width, p, maps, device, stream);
        launch_rsws<8, GEMM1, 4>(grid, p, maps, stream);
      } else if (c.token_tile == 64) {
        launch_rsws<8, GEMM1, 2>(grid, p, maps, stream);
      } else {
        launch_rsws<16, GEMM1, 2>(grid, p, maps, stream);
      }
    }
  }
  FP4MOE_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (kernel == Sm90Kernel::ws) g_ws_launches.fetch_add(1, std::memory_order_relaxed);
  if (kernel == Sm90Kernel::rsws) g_rsws_launches.fetch_add(1, std::memory_order_relaxed);
  if (kernel == Sm90Kernel::rsws4) g_rsws4_launches.fetch_add(1, std::memory_order_relaxed);
}

// "" when every sm90 kernel has sm_90a code for `device` (and may use its shared memory),
// else why not. Checked once per device; sets the kernels' dynamic shared memory limit.
template <class Kernel>
std::string prepare_kernel(Kernel kernel, int smem, const std::string& name) {
  cudaFuncAttributes attr{};
  if (cudaError_t err = cudaFuncGetAttributes(&attr, kernel); err != cudaSuccess) {
    (void)cudaGetLastError();
    return name + ": cudaFuncGetAttributes: " + cudaGetErrorString(err);
  }
  if (attr.binaryVersion != 90)
    return name + ": the device runs its sm_" + std::to_string(attr.binaryVersion) +
           " code, which has no wgmma body";
  if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      err != cudaSuccess) {
    (void)cudaGetLastError();
    return name + ": cudaFuncSetAttribute(" + std::to_string(smem) + " B): " + cudaGetErrorString(err);
  }
  return "";
}

// The narrow widths kMinNarrowWidth..kMaxNarrowWidth.
using kNarrowWidthSequence = std::integer_sequence<int, 2, 3, 4, 5, 6, 7>;
static_assert(kMinNarrowWidth == 2 && kMaxNarrowWidth == 7, "kNarrowWidthSequence lists every narrow width");

// rsws4's narrow-width instantiations of GEMM 1 or 2 (the widths of the sequence), NVFP4 and MX:
// GEMM 1's through prepare_rsws4_narrow_gemm1.
template <bool GEMM1, int... W>
std::string prepare_rsws4_narrow_here(std::integer_sequence<int, W...>) {
  const std::string g = GEMM1 ? " gemm1" : " gemm2";
  std::string why;
  auto one = [&](auto kernel, int smem, int width, const char* mx) {
    if (why.empty()) why = prepare_kernel(kernel, smem, "rsws4" + g + " width " + std::to_string(width) + mx);
  };
  (one(sm90_rsws_gemm<8, GEMM1, 4, false, W>, RsWsTileOf<8, 4, W>::kSmem, W, ""), ...);
  (one(sm90_rsws_gemm<8, GEMM1, 4, true, W>, RsWsTileOf<8, 4, W>::kSmem, W, " MX"), ...);
  return why;
}

template <bool GEMM1>
std::string prepare_rsws4_narrow() {
  if constexpr (GEMM1) return prepare_rsws4_narrow_gemm1();
  else return prepare_rsws4_narrow_here<false>(kNarrowWidthSequence{});
}

// rsws's wide-width instantiations of GEMM 1 or 2 (kWideWidths, launch_rsws_wide), NVFP4 and MX:
// GEMM 1's through prepare_rsws_wide_gemm1.
template <bool GEMM1>
std::string prepare_rsws_wide_here() {
  static_assert(std::size(kWideWidths) == 3 && kWideWidths[0] == 10 && kWideWidths[1] == 12 &&
                    kWideWidths[2] == 14,
                "one kernel per wide width");
  const std::string g = "rsws" + std::string(GEMM1 ? " gemm1" : " gemm2") + " width ";
  constexpr int k10 = RsWsTileOf<16, 2, 10>::kSmem, k12 = RsWsTileOf<16, 2, 12>::kSmem,
                k14 = RsWsTileOf<16, 2, 14>::kSmem;
  for (const std::string& why : {prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, false, 10>, k10, g + "10"),
                                 prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, true, 10>, k10, g + "10 MX"),
                                 prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, false, 12>, k12, g + "12"),
                                 prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, true, 12>, k12, g + "12 MX"),
                                 prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, false, 14>, k14, g + "14"),
                                 prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, true, 14>, k14, g + "14 MX")})
    if (!why.empty()) return why;
  return "";
}
template <bool GEMM1>
std::string prepare_rsws_wide() {
  if constexpr (GEMM1) return prepare_rsws_wide_gemm1();
  else return prepare_rsws_wide_here<false>();
}

// Every rsws instantiation of GEMM 1 or 2: 64- and 128-token tiles, 2 or 4 consumer
// warpgroups, NVFP4 or MX scales.
template <bool GEMM1>
std::string prepare_rsws() {
  const std::string g = GEMM1 ? " gemm1" : " gemm2";
  for (const std::string& why :
       {prepare_kernel(sm90_rsws_gemm<8, GEMM1, 2, false>, RsWsTile<8, 2>::kSmem, "rsws" + g + " tile 64"),
        prepare_kernel(sm90_rsws_gemm<8, GEMM1, 2, true>, RsWsTile<8, 2>::kSmem, "rsws" + g + " tile 64 MX"),
        prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, false>, RsWsTile<16, 2>::kSmem, "rsws" + g + " tile 128"),
        prepare_kernel(sm90_rsws_gemm<16, GEMM1, 2, true>, RsWsTile<16, 2>::kSmem, "rsws" + g + " tile 128 MX"),
        prepare_kernel(sm90_rsws_gemm<8, GEMM1, 4, false>, RsWsTile<8, 4>::kSmem, "rsws4" + g + " tile 64"),
        prepare_kernel(sm90_rsws_gemm<8, GEMM1, 4, true>, RsWsTile<8, 4>::kSmem, "rsws4" + g + " tile 64 MX"),
        prepare_rsws4_narrow<GEMM1>(),
        prepare_rsws_wide<GEMM1>()})
    if (!why.empty()) return why;
  return "";
}

// Every kernel of GEMM 1 or 2: rs and ws at 64 and 128 tokens, and every rsws instantiation.
template <bool GEMM1>
std::string prepare_gemm() {
  const std::string g = GEMM1 ? "gemm1" : "gemm2";
  for (const std::string& why :
       {prepare_kernel(sm90_grouped_gemm<8, GEMM1>, Tile<8>::kSmem, g + " tile 64"),
        prepare_kernel(sm90_grouped_gemm<16, GEMM1>, Tile<16>::kSmem, g + " tile 128"),
        prepare_kernel(sm90_ws_gemm<8, GEMM1>, WsTile<8>::kSmem, "ws " + g + " tile 64"),
        prepare_kernel(sm90_ws_gemm<16, GEMM1>, WsTile<16>::kSmem, "ws " + g + " tile 128"), prepare_rsws<GEMM1>()})
    if (!why.empty()) return why;
  return "";
}

inline Params base_params(const Sm90Config& c, const WeightMatrix& w, const ExpertRows& rows, const uint16_t* a_bf16,
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

}  // namespace fp4moe::cuda
