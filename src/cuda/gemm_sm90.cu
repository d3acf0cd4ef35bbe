// The grouped GEMMs on Hopper warpgroup MMA (FP4MOE_GEMM=sm90; sm_90a only) for
// prefill-sized batches: at least 64 rows per active expert (kimi-k2 from T ~ 4096).
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
//     the two m-tiles' wgmma of a k-step form one group (kPairGroups; A decoded for both
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
  st.a_bf16 = 0;
  st.h_bf16 = a_staging_bytes(row_space, H, I);
  st.bytes = st.h_bf16 + (size_t(std::max<int64_t>(row_space, 0)) * size_t(I) * 2 + 255) / 256 * 256;
  return st;
}

size_t a_staging_bytes(int64_t row_space, int64_t H, int64_t I) {
  return (size_t(std::max<int64_t>(row_space, 0)) * size_t(std::max(H, I)) * 2 + 255) / 256 * 256;
}

namespace {

constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;
constexpr int kBlocksPerCta = kSm90RowTile / kFragRows;  // 16 fragment rows
constexpr int kStages = 5;
constexpr int kSmemPerSm = 228 * 1024;   // H100/H200 shared memory per SM (1 KiB of it reserved per CTA)
constexpr int kSmemPerCta = 227 * 1024;  // the most one CTA may opt in to

// One pipeline stage: [B tile][16 fragment blocks][their scales].
template <int NT>
struct Tile {
  static constexpr int kTok = 8 * NT;                             // tokens per CTA = the wgmma N
  static constexpr int kBBytes = kTok * 128;                      // bf16 [tok][64 k], 128-byte swizzle
  static constexpr int kWBytes = kBlocksPerCta * kFragWords * 4;  // 8 KiB
  static constexpr int kSBytes = kBlocksPerCta * 64;              // room for NVFP4's 64 B per block
  static constexpr int kStageBytes = kBBytes + kWBytes + kSBytes;
  static constexpr int kPrefetch = kStages - 2;  // k-blocks loaded ahead; one more stage is read by the wgmma in flight
  static constexpr int kSmem = kStages * kStageBytes + 1024;      // + slack to align the base to 1024
  static constexpr int kStaticSmem = 2 * kTok * 8 + 16;           // row tables, expert and tile
  // Both m-tiles' wgmma in one commit group (two queued while the next k-step decodes): the
  // 64-token kernel has the registers for the second A set (H200, kimi-k2 T = 2048 / 8192:
  // 7.70 / 19.85 ms vs 7.90 / 20.17 one wgmma per group); at 128 tokens it measured slower
  // (T = 16384 47.4 vs 44.5 ms).
  static constexpr bool kPairGroups = NT == 8;
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
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows, K = w.K;
  const int nb0 = blockIdx.x * kBlocksPerCta;
  const int fb = wg * 8 + 2 * wl;  // the warp's fragment rows in the CTA: fb (m-tile 0), fb + 1 (m-tile 1)
  const bool row_ok[2] = {nb0 + fb < NB, nb0 + fb + 1 < NB};  // fragment rows past N: zero weights
  const bool mx = w.block == 32;
  const int sb = frag_scale_bytes(w.block);

  for (int64_t slot = blockIdx.y; slot < p.tiles; slot += gridDim.y) {
    // ---- which (expert, token tile) is this slot: warp 0 scans count[] ----
    // (sm80::enter_slot's steps, written out: through the call the 128-token kernel, which
    // sits at its 168-register cap, spills a few registers)
    if (warp == 0) sm80::find_slot<kTok>(slot, p.rows.count, w.num_experts, lane, &s_expert, &s_tile);
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
      for (int i = 0; i < kBlocksPerCta / 8; ++i) {
        const int nb = nb0 + wb + 8 * i;
        if (nb < NB)
          ptx::cp_async_16(st + T::kBBytes + (wb + 8 * i) * (kFragWords * 4) + lane * 16,
                           w.q + ((int64_t(e) * NB + nb) * KB + kb) * kFragWords + lane * 4, true);
      }
      if (sc_copy)
        ptx::cp_async_16(st + T::kBBytes + T::kWBytes + sc_b * 64 + sc_part * 16,
                         w.scale + ((int64_t(e) * NB + nb0 + sc_b) * KB + kb) * sb + sc_part * 16, true);
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
      // The warp's two fragment blocks: e2m1 words once per k-block (16 bytes per lane), scale
      // bytes again at each k-step (fewer live registers; they are 8 bytes per lane).
      const uint8_t* frag[2];
      const uint8_t* scales[2];
      uint4 wq[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        frag[mt] = st + T::kBBytes + (fb + mt) * (kFragWords * 4);
        scales[mt] = st + T::kBBytes + T::kWBytes + (fb + mt) * 64;
        uint2 unused;
        wq[mt] = make_uint4(0u, 0u, 0u, 0u);  // past the last fragment row: zero weights, outputs not written
        if (row_ok[mt]) sm80::load_weight_frag(frag[mt], scales[mt], lane, g, sb, mx, wq[mt], unused);
      }
      // k-step kk reads B bytes 32kk..32kk+31 of each token row: start address + 32kk (the
      // hardware applies the swizzle to the full address, so the offset stays inside the row).
      const uint64_t desc = ptx::wgmma_desc_kmajor_sw128(smem_addr + uint32_t(stage * T::kStageBytes));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (T::kPairGroups) {
          // Both m-tiles' A decoded first, then their two wgmma as one group: two wgmma queued
          // while the next k-step decodes.
          uint32_t a[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            uint4 unused;
            uint2 ws = make_uint2(0u, 0u);
            if (row_ok[mt]) sm80::load_weight_frag(frag[mt], scales[mt], lane, g, sb, mx, unused, ws);
            sm80::weight_a_frag(a[mt], wq[mt], ws, kk, mx);
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
          uint4 unused;
          uint2 ws = make_uint2(0u, 0u);  // NVFP4: bytes [c 4][half 2]; MX: [c 2][half 2] in .x
          if (row_ok[mt]) sm80::load_weight_frag(frag[mt], scales[mt], lane, g, sb, mx, unused, ws);
          sm80::weight_a_frag(a, wq[mt], ws, kk, mx);
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
    __syncthreads();  // the row tables and stages are reused by the next slot
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

// Why the wgmma kernels decline NVFP4 A: gemm1/gemm2 stage it to bf16 wherever these kernels
// could run, so it arrives here only when that was impossible.
const char* const kUnstagedA =
    "NVFP4 A was not staged to bf16 (gemm_dispatch.cpp: no room in the scratch, or A rows unknown)";

// GEMM 1 on bf16 A. NVFP4 h: the kernel writes bf16 h (the caller's h_bf16 if given, else the
// scratch's h_bf16), then it is requantized into h_fp4 / h_scale.
bool sm90_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  const int64_t H = cw.w13.K, I = cw.w13.N / 2, E = cw.w13.num_experts;
  const Sm90Staging st = sm90_staging(a.rows.rows_bound, a.rows.row_space, E, H, I);
  std::string refused;
  if (a.a_fp4) {
    refused = kUnstagedA;
  } else if (a.h_fp4) {
    refused = staging_refusal(st, a.partials, a.partials_bytes, E);
    if (refused.empty() && (misaligned(a.h_fp4, 4) || (a.h_bf16 && misaligned(a.h_bf16, 16))))
      refused = "h_fp4 not 4-byte or h_bf16 not 16-byte aligned for the requantization";
  }
  const Sm90Config c = plan("gemm1", cw, cw.w13, a.rows, a.a_fp4 || a.h_fp4, refused);
  if (!c.use) return false;
  uint16_t* h = a.h_bf16;
  if (a.h_fp4 && !h) h = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(a.partials) + st.h_bf16);
  Params p = base_params(c, cw.w13, a.rows, a.a_bf16, a.a_dq);
  p.a_gather = a.a_gather;
  p.epi.act = cw.desc.activation;
  p.epi.alpha = cw.desc.swiglu_alpha;
  p.epi.limit = cw.desc.swiglu_limit;
  p.epi.h_bf16 = h;
  launch<true>(c, p, stream);
  if (a.h_fp4) stage_bf16_to_nvfp4(h, I, a.rows, E, a.h_gs, a.h_fp4, a.h_scale, stream);
  return true;
}

// GEMM 2 on bf16 A (h).
bool sm90_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const Sm90Config c = plan("gemm2", cw, cw.w2, a.rows, a.a_fp4 != nullptr, a.a_fp4 ? kUnstagedA : "");
  if (!c.use) return false;
  Params p = base_params(c, cw.w2, a.rows, a.a_bf16, a.a_dq);
  p.epi.y = a.y;
  launch<false>(c, p, stream);
  return true;
}

}  // namespace fp4moe::cuda
