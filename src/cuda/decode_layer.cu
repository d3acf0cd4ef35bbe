// The one-kernel layer at the fewest tokens (decode_layer.hpp says what and why).
//
// The kernel, one CTA per SM, all resident (a cooperative launch), 16 consumer warps and one
// producer warp:
//   1. Consumer warp 0 groups the T * k top-k slots by local expert with warp votes and
//      shuffles (slots in order, at most kLayerGroupSlots per group; ids outside [-1, E) and
//      experts not local join none; CTA 0 writes the status word) while the other consumer
//      warps write x as GEMM 1's bf16 input (W4A4: its NVFP4 values) into shared memory. Each
//      CTA takes its share of the units: GEMM 1's (group, row pair) and GEMM 2's, each GEMM's
//      units cut evenly over the CTAs in order.
//   2. The producer's lane 0 streams the CTA's units' weights through a ring of stages by bulk
//      copies (cp.async.bulk, complete_tx on the stage's mbarrier): a stage is up to 16 * kpw
//      k-blocks of one unit's two fragment rows, their fragment blocks and scale bytes
//      contiguous in the weight layout (gemm_internal.hpp), four copies per stage. It goes on
//      into GEMM 2's first stages (as many as the ring holds) while the consumers finish GEMM 1.
//   3. GEMM 1: consumer warp w takes k-blocks w + 16 j (j < kpw) of each stage (the decode
//      kernel's weight decode and mma.m16n8k16, swap-AB: the group's slots are the n8
//      columns), keeping its own fp32 sums per unit in shared memory; after every batch of
//      units (Params::batch) the 16 warps meet, every consumer thread adds some of the batch's
//      sums over the warps in warp order, they meet again, and warps [0, batch) run the
//      batch's epilogues at once (the fast path's GEMM 1 epilogue: bias, activation, bf16 or
//      NVFP4 requantization), h rows by slot.
//   4. Grid barrier. The consumers load the h rows of their GEMM 2 units into shared memory and
//      run GEMM 2 alike (the epilogue writes y rows by slot, fp32).
//   5. Grid barrier. Every thread of the grid combines a share of out's columns: combine.cu's
//      arithmetic (slots in order, products and sums not fused, then out added when
//      accumulating).
// No float atomics: each sum's order is fixed by the shape and the grid (the SM count).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/act_rows.cuh"
#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/common/env.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/common/ptx_sm90.cuh"
#include "cuda/decode_layer.hpp"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"
#include "cuda/local_expert.cuh"
#include "cuda/out_cols.cuh"
#include "cuda/pipeline.hpp"

namespace fp4moe::cuda {
namespace {

constexpr int kW = 16;                   // consumer warps; a stage holds up to kW k-blocks
constexpr int kThreads = 32 * (kW + 1);  // and the producer warp
constexpr int kMaxStages = 8;
constexpr int kMinStages = 3;
constexpr int kGoodStages = 8;
constexpr int kAccFloats = 8;  // a lane's sums of one unit: 2 m-tiles x one n8 tile x 4
constexpr int kMaxBatch = 4;  // units whose sums meet at once (Params::batch)
// a batch's sums: per unit, each warp's and then their total
__host__ __device__ constexpr int partial_bytes(int batch) { return batch * (kW + 1) * kAccFloats * 32 * 4; }
constexpr int kFragBytes = kFragWords * 4;                   // 512

// A stage: [fragment row 0: kW blocks][row 1: kW blocks][row 0's scales: kW x sb][row 1's]
// kpw: k-blocks per consumer warp and stage (Params::kpw)
__host__ __device__ constexpr int stage_bytes(int sb, int kpw) { return 2 * kW * kpw * (kFragBytes + sb); }
constexpr int kMaxKpw = 2;

struct Params {
  WeightMatrix w13, w2;
  act::SrcRows x;  // T rows of H
  bool w4a4;
  float gs1;       // W4A4: x's q_scale
  float mult1, mult2;
  sm80::Epilogue epi1, epi2;
  const int32_t* ids;
  const float* wts;  // nullptr: unweighted combine
  const int32_t* map;
  int64_t E;
  int T, k;
  uint32_t* status;
  unsigned* barrier;  // the grid barriers' counter, zeroed before the launch
  uint16_t* h;
  float* y;
  void* out;
  int out_dt;
  int64_t out_stride;
  bool accumulate;
  int stages;
  int batch;  // units per meeting of the consumer warps, [1, kMaxBatch]
  int kpw;    // k-blocks per consumer warp and stage, [1, kMaxKpw]: a stage is kW * kpw k-blocks
  int x_row_bytes, h_row_bytes;  // per x / h row in shared memory
  uint32_t act_off, ring_off;  // dynamic shared memory offsets
  int probe;  // FP4MOE_LAYER_PROBE, with the stamps only (results garbage): 1 no decode / MMA, 2 no copies
  uint64_t* trace;  // FP4MOE_LAYER_TRACE: kTraceEvents clock64 and globaltimer pairs per CTA, or nullptr
};

// FP4MOE_LAYER_TRACE=path (a measuring aid): the kernel stamps these events per CTA (clock64 and
// globaltimer), and the last forward's stamps are written to path at exit, one line per CTA.
enum TraceEvent {
  kTrStart, kTrSlots, kTrGroups, kTrIssue1, kTrIssued1, kTrIssuedAhead, kTrLanded, kTrGemm1,
  kTrBarrier1, kTrHLoaded, kTrGemm2, kTrBarrier2, kTrEnd, kTrUnits1, kTrUnits2,
  // cycles spent, summed over the kernel (clock64 part only): thread 0 waiting for GEMM 1's and
  // GEMM 2's stages, at the batches' meetings and in the epilogues it runs; the producer
  // waiting for free stages and issuing copies
  kTrSumWait1, kTrSumWait2, kTrSumMeet, kTrSumEpi, kTrSumFree, kTrSumIssue, kTraceEvents
};

#if defined(FP4MOE_LAYER_WATCHDOG)
__device__ int g_layer_abort = 0;  // (declared for every target: the host stub names it)
#endif

#if defined(FP4MOE_SM90A)
// The summed events' first and their count (in the sm_90a kernel only: the other targets' passes
// would warn of them unused).
constexpr int kTrSums = kTrSumWait1, kTrSumCount = kTraceEvents - kTrSumWait1;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async.bulk global -> shared, complete_tx on bar (16-byte aligned, a multiple of 16 bytes)
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// FP4MOE_LAYER_WATCHDOG (a debugging build): a wait that has not ended within a second prints
// what it waited for, raises the flag, and returns; every wait returns at once once the flag is
// up, so that the kernel ends and its messages reach the host. Results are then garbage.
#if defined(FP4MOE_LAYER_WATCHDOG)
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ bool watchdog_fired(uint64_t t0, int what, int it, uint32_t parity) {
  if (*reinterpret_cast<volatile int*>(&g_layer_abort)) return true;
  if (now_ns() - t0 < 1000000000ull) return false;
  if (atomicExch(&g_layer_abort, 1) == 0)
    printf("decode_layer: CTA %d thread %d: wait %d (stage %d, parity %u) not over after 1 s\n", int(blockIdx.x),
           int(threadIdx.x), what, it, parity);
  return true;
}
#endif

// The stamps' helpers: nothing in the kernel built without them (TR false, the one that runs
// unless FP4MOE_LAYER_TRACE is set).
__shared__ long long s_trace_sum[kTrSumCount];
template <bool TR>
__device__ __forceinline__ long long tick() {
  if constexpr (TR) return clock64();
  return 0;
}
template <bool TR>
__device__ __forceinline__ void trace_add(int event, long long since) {
  if constexpr (TR) s_trace_sum[event - kTrSums] += clock64() - since;
}
template <bool TR>
__device__ __forceinline__ void stamp(const Params& p, int event) {
  if constexpr (!TR) return;
  uint64_t g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  uint64_t* t = p.trace + size_t(blockIdx.x) * 2 * kTraceEvents;
  t[event] = uint64_t(clock64());
  t[kTraceEvents + event] = g;
}

// mbarrier_wait_parity (what, it: the watchdog's message).
__device__ __forceinline__ void wait_parity(uint32_t bar, uint32_t parity, int what, int it) {
#if defined(FP4MOE_LAYER_WATCHDOG)
  const uint64_t t0 = now_ns();
  while (!ptx::mbarrier_try_wait_parity(bar, parity))
    if (watchdog_fired(t0, what, it, parity)) return;
#else
  (void)what;
  (void)it;
  ptx::mbarrier_wait_parity(bar, parity);
#endif
}

// Barrier `round` (1, 2) of the whole grid, all threads of every CTA: `counter` (zeroed before
// the launch) counts the CTAs' arrivals, release / acquire at gpu scope, as cooperative groups'
// grid sync does.
__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
    const unsigned target = round * gridDim.x;
#if defined(FP4MOE_LAYER_WATCHDOG)
    const uint64_t t0 = now_ns();
#endif
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
#if defined(FP4MOE_LAYER_WATCHDOG)
      if (seen < target && watchdog_fired(t0, 10 + int(round), int(seen), target)) break;
#endif
    } while (seen < target);
  }
  __syncthreads();
}

// The slots' grouping, the same in every CTA.
struct Groups {
  int e[kLayerMaxSlots];      // local expert of slot s, or -1
  int count;                  // groups
  int expert[kLayerMaxSlots];                  // group g's local expert
  int8_t slot[kLayerMaxSlots][kLayerGroupSlots];  // its slots in order, -1 past them
  int off[kLayerMaxSlots + 1];                 // prefix of the groups' slot counts
};

// The slots' grouping, by warp 0 (n <= kLayerMaxSlots = 64: slots lane and lane + 32): slot s
// joins the group of the first slot of its expert's occurrences occ - occ % kLayerGroupSlots
// (occ: its expert's slots before it); groups are numbered by their first slots in order. CTA
// 0 also writes the status word.
__device__ __forceinline__ void group_slots(const Params& p, int n, Groups& G) {
  static_assert(kLayerMaxSlots == 64, "two slots a lane");
  constexpr unsigned kAll = 0xFFFFFFFFu;
  const int lane = threadIdx.x % 32;
  int id[2], e[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int s = lane + 32 * h;
    id[h] = s < n ? p.ids[s] : -1;
    e[h] = s < n ? local_expert(id[h], p.map, p.E, p.w13.num_experts) : -1;
    if (s < n) G.e[s] = e[h];
  }
  if (blockIdx.x == 0) {
    const bool bad = id[0] < -1 || id[0] >= p.E || id[1] < -1 || id[1] >= p.E;
    const bool any_bad = __any_sync(kAll, bad);  // (every lane: the vote's mask names them all)
    if (lane == 0) *p.status = any_bad ? kStatusBadId : 0u;
  }
  // each slot's occurrences before it, and its expert's slots in all
  int occ[2] = {0, 0}, tot[2] = {0, 0};
  for (int j = 0; j < n; ++j) {
    const int ej = __shfl_sync(kAll, j < 32 ? e[0] : e[1], j % 32);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      occ[h] += ej == e[h] && j < lane + 32 * h;
      tot[h] += ej == e[h];
    }
  }
  // leaders (a group's first slot): their group numbers, sizes and the sizes' running sums
  const unsigned below = (1u << lane) - 1u;
  bool lead[2];
  unsigned ballot[2];
  int gid[2], size[2], upto[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lead[h] = e[h] >= 0 && occ[h] % kLayerGroupSlots == 0;
    ballot[h] = __ballot_sync(kAll, lead[h]);
    size[h] = lead[h] ? min(kLayerGroupSlots, tot[h] - occ[h]) : 0;
    upto[h] = ptx::warp_inclusive_sum(size[h], lane);
  }
  const int first_half = __shfl_sync(kAll, upto[0], 31);
  upto[1] += first_half;
  gid[0] = __popc(ballot[0] & below);
  gid[1] = __popc(ballot[0]) + __popc(ballot[1] & below);
  // every slot's group: its leader's number
  int mine[2] = {-1, -1};
  for (int j = 0; j < n; ++j) {
    const int h = j / 32, src = j % 32;
    const int ej = __shfl_sync(kAll, h ? e[1] : e[0], src);
    const int oj = __shfl_sync(kAll, h ? occ[1] : occ[0], src);
    const int gj = __shfl_sync(kAll, h ? gid[1] : gid[0], src);
#pragma unroll
    for (int q = 0; q < 2; ++q)
      if (e[q] >= 0 && ej == e[q] && oj == occ[q] - occ[q] % kLayerGroupSlots) mine[q] = gj;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (lead[h]) {
      G.expert[gid[h]] = e[h];
      G.off[gid[h] + 1] = upto[h];
      for (int c = size[h]; c < kLayerGroupSlots; ++c) G.slot[gid[h]][c] = -1;
    }
    if (mine[h] >= 0) G.slot[mine[h]][occ[h] % kLayerGroupSlots] = int8_t(lane + 32 * h);
  }
  if (lane == 0) {
    G.off[0] = 0;
    G.count = __popc(ballot[0]) + __popc(ballot[1]);
  }
}

// Pairs of bf16 (words) of logical k c, c + 2, .. (c % 4 == 0, n words) of a row at `row`,
// stored k-permuted (gemm_internal.hpp kperm_index: a pair stays whole).
__device__ __forceinline__ void store_kperm_words(uint8_t* row, int c, const uint32_t* wd, int n) {
  for (int j = 0; j < n; ++j) *reinterpret_cast<uint32_t*>(row + kperm_index(c + 2 * j) * 2) = wd[j];
}

// x into shared memory as GEMM 1's input (bf16; W4A4: its NVFP4 values in bf16), k-permuted as
// the consumers read B (MMA order), by consumer warps 1..kW-1 while warp 0 groups the slots.
__device__ __forceinline__ void stage_x(const Params& p, uint8_t* act) {
  const int K1 = p.w13.K, Kp1 = p.w13.Kp;
  const int first = 32, stride = (kW - 1) * 32;
  if (p.w4a4) {
    for (int i = int(threadIdx.x) - first; i < p.T * (Kp1 / kNvfp4Block); i += stride) {
      const int r = i / (Kp1 / kNvfp4Block), b = i % (Kp1 / kNvfp4Block);
      uint8_t* o = act + size_t(r) * p.x_row_bytes;
      uint32_t v[2][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}};
      if (b * kNvfp4Block < K1) {
        uint32_t lo, hi;
        const float sc = e4m3_to_f32(act::quantize_block(p.x, r, b, p.gs1, lo, hi));
        nvfp4_values_bf16x8(lo, sc, v[0]);
        nvfp4_values_bf16x8(hi, sc, v[1]);
      }
      store_kperm_words(o, b * kNvfp4Block, v[0], 4);
      store_kperm_words(o, b * kNvfp4Block + 8, v[1], 4);
    }
  } else {
    for (int i = int(threadIdx.x) - first; i < p.T * (Kp1 / 8); i += stride) {
      const int r = i / (Kp1 / 8), c = (i % (Kp1 / 8)) * 8;
      uint32_t wd[4] = {0u, 0u, 0u, 0u};
      if (c < K1) {
        float v[8];
        act::load_row<8>(p.x, r, c, v);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          wd[j] = uint32_t(bf16_from_f32(v[2 * j])) | (uint32_t(bf16_from_f32(v[2 * j + 1])) << 16);
      }
      store_kperm_words(act + size_t(r) * p.x_row_bytes, c, wd, 4);
    }
  }
}

// Units [u0, u1) of a GEMM with `total` units: the CTA's even share, in order.
__device__ __forceinline__ void share(int total, int& u0, int& u1) {
  // (total <= kLayerMaxSlots * N / 32 and the grid the SM count: the products fit 32 bits)
  u0 = int(unsigned(total) * blockIdx.x / gridDim.x);
  u1 = int(unsigned(total) * (blockIdx.x + 1) / gridDim.x);
}

struct Mat {
  int KB, NB, NG, RP, sb, kpw, per;  // per: k-blocks a stage
  __device__ Mat(const WeightMatrix& w, int kpw_)
      : KB(w.Kp / kFragK), NB(w.N / kFragRows), NG(frag_groups(w.N)), RP((w.N / kFragRows + 1) / 2),
        sb(frag_scale_bytes(w.block)),
        kpw(kpw_), per(kW * kpw_) {}
  __device__ int chunks() const { return (KB + per - 1) / per; }
  __device__ int bytes() const { return stage_bytes(sb, kpw); }
};

// The producer's stage `it` (unit of group gid, row pair rp, chunk c of `m`): waits for the
// slot, then its four copies.
template <bool TR>
__device__ __forceinline__ void issue_stage(const Params& p, const WeightMatrix& w, const Mat& m, int e, int rp,
                                            int c, int it, int stages, uint8_t* ring, uint64_t* full,
                                            uint64_t* empty) {
  const int s = it % stages;
  long long t0 = tick<TR>();
  wait_parity(smem_addr(&empty[s]), ((it / stages) & 1) ^ 1, 0, it);
  trace_add<TR>(kTrSumFree, t0);
  t0 = tick<TR>();
  const int kb0 = c * m.per, nk = min(m.per, m.KB - kb0);
  const uint32_t bar = smem_addr(&full[s]);
  if (TR && p.probe == 2) {
    ptx::mbarrier_arrive(bar);
    trace_add<TR>(kTrSumIssue, t0);
    return;
  }
  ptx::mbarrier_expect_tx(bar, uint32_t(2 * nk * (kFragBytes + m.sb)));
  uint8_t* st = ring + size_t(s) * m.bytes();
  // Per k-block the pair's two fragment blocks, side by side in the layout (gemm_internal.hpp
  // frag_block; a pair past N, NB odd, takes the last group's zero row): stage [kl][mt].
  for (int kl = 0; kl < nk; ++kl) {
    const int64_t blk = frag_block(e, 2 * rp, kb0 + kl, m.NG, m.KB);
    bulk_load(smem_addr(st + kl * 2 * kFragBytes), w.q + blk * kFragWords, uint32_t(2 * kFragBytes), bar);
    bulk_load(smem_addr(st + 2 * m.per * kFragBytes + kl * 2 * m.sb), w.scale + blk * m.sb, uint32_t(2 * m.sb), bar);
  }
  ptx::mbarrier_arrive(bar);
  trace_add<TR>(kTrSumIssue, t0);
}

// A consumer warp's part of one GEMM: its units' stages from `it` on; returns the stage count
// after them. act_row(gid, col): the shared-memory activation row of column col of group gid.
template <bool MX, bool GEMM1, bool TR, class ActRow>
__device__ __forceinline__ int consume(const Params& p, const WeightMatrix& w, const Groups& G, int u0, int u1,
                                       int it, uint8_t* ring, float* partials, uint64_t* full, uint64_t* empty,
                                       ActRow act_row) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int s_byte = sm80::scale_word_byte(t, MX);  // the lane's scale pair's byte (kperm)
  const Mat m(w, p.kpw);
  const uint32_t decode_low = sm80::decode_table(w);
  const uint32_t mul16 = ptx::per_thread(16u, w.zero);  // (the scale's multiply an IMAD, as the decode kernels')
  const int nch = m.chunks();
  int s = it % p.stages;  // the stage slot of `it` and its phase's parity, kept as `it` steps
  uint32_t parity = (it / p.stages) & 1;
  float* sums = partials + p.batch * kW * kAccFloats * 32;  // a batch's sums, unit after unit
  float escale = 0.0f;
  for (int u = u0; u < u1; ++u) {
    const int gid = u / m.RP;
    const int col = G.slot[gid][g] >= 0 ? g : 0;
    const uint8_t* arow = act_row(gid, col);
    const int n = u - u0, j = n % p.batch, ub = u - j, nb = min(p.batch, u1 - ub);
    // Warp jj runs the epilogue of the batch's unit jj: its expert's output scale, loaded at
    // the batch's start, so that its latency falls in the batch's stages.
    if (j == 0 && warp < nb) escale = w.epi[G.expert[(ub + warp) / m.RP]] * (GEMM1 ? p.mult1 : p.mult2);
    float acc[2][1][4];
    sm80::zero_acc<1>(acc);
    for (int c = 0; c < nch; ++c, ++it) {
      const long long t0 = tick<TR>();
      wait_parity(smem_addr(&full[s]), parity, GEMM1 ? 1 : 2, it);
      if (threadIdx.x == 0) trace_add<TR>(GEMM1 ? kTrSumWait1 : kTrSumWait2, t0);
      if (GEMM1 && it == 0 && threadIdx.x == 0) stamp<TR>(p, kTrLanded);
      // k-blocks warp + kW * j of the stage, j < kpw: their loads first, then the MMAs
      const uint8_t* st = ring + size_t(s) * m.bytes();
      uint4 wq[kMaxKpw][2];
      uint32_t ws[kMaxKpw][2];  // the lane's scale word (rows g, g+8 of column t: kperm)
      bool on[kMaxKpw];
#pragma unroll
      for (int j = 0; j < kMaxKpw; ++j) {
        const int kl = warp + kW * j;
        on[j] = j < p.kpw && c * m.per + kl < m.KB && !(TR && p.probe == 1);
        if (!on[j]) continue;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          wq[j][mt] = *reinterpret_cast<const uint4*>(st + (kl * 2 + mt) * kFragBytes + lane * 16);
          const uint8_t* sp = st + 2 * m.per * kFragBytes + (kl * 2 + mt) * m.sb + sm80::scale_word_offset(g, t, m.sb);
          ws[j][mt] = *reinterpret_cast<const uint32_t*>(sp);
        }
      }
#pragma unroll
      for (int j = 0; j < kMaxKpw; ++j) {
        if (!on[j]) continue;
        const uint32_t* b = reinterpret_cast<const uint32_t*>(arow + (c * m.per + warp + kW * j) * kFragK * 2) + t;
        uint32_t sp[2];  // the rows' scale pairs, once for the four k-steps
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) sp[mt] = sm80::scale_rows_bf16x2(ws[j][mt], s_byte, MX, mul16);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            uint32_t a[4];
            sm80::weight_a_frag(a, wq[j][mt], sp[mt], kk, decode_low);
            ptx::mma_m16n8k16_bf16(acc[mt][0], a, b[kk * 8], b[kk * 8 + 4]);
          }
      }
      // Every consumer thread releases the stage after its own reads (the barrier counts
      // 32 * kW): one lane's arrive after __syncwarp does not order the other lanes' shared
      // loads before the producer's next bulk copy into the stage, by the memory model.
      ptx::mbarrier_arrive(smem_addr(&empty[s]));
      if (++s == p.stages) {
        s = 0;
        parity ^= 1u;
      }
    }
    // The warp's sums of unit j of the batch, kept; at the batch's end the 16 warps meet, add
    // each sum in warp order (every consumer thread some of them), meet again, and warps
    // [0, nb) run the nb epilogues at once.
    const float (&flat)[kAccFloats] = reinterpret_cast<const float (&)[kAccFloats]>(acc);
#pragma unroll
    for (int i = 0; i < kAccFloats; ++i) partials[((j * kW + warp) * kAccFloats + i) * 32 + lane] = flat[i];
    if (j + 1 < nb) continue;
    const long long t0 = tick<TR>();
    ptx::named_barrier_sync(1, kW * 32);
    for (int q = threadIdx.x; q < nb * kAccFloats * 32; q += kW * 32) {
      const float* in = partials + (q / (kAccFloats * 32)) * (kW * kAccFloats * 32) + q % (kAccFloats * 32);
      float sum = in[0];
#pragma unroll
      for (int v = 1; v < kW; ++v) sum += in[v * kAccFloats * 32];
      sums[q] = sum;
    }
    ptx::named_barrier_sync(1, kW * 32);
    if (threadIdx.x == 0) trace_add<TR>(kTrSumMeet, t0);
    if (warp < nb) {
      const long long t1 = tick<TR>();
      const int ue = ub + warp, egid = ue / m.RP, erp = ue % m.RP;
      float sum[2][1][4];
      float (&sf)[kAccFloats] = reinterpret_cast<float (&)[kAccFloats]>(sum);
#pragma unroll
      for (int i = 0; i < kAccFloats; ++i) sf[i] = sums[(warp * kAccFloats + i) * 32 + lane];
      auto out_row = [&](int, int cc) -> int64_t { return G.slot[egid][2 * t + cc]; };
      if constexpr (GEMM1) sm80::epilogue_gemm1<1>(p.epi1, w, G.expert[egid], 2 * erp, g, escale, sum, out_row);
      else sm80::epilogue_gemm2<1>(p.epi2, w, G.expert[egid], 2 * erp, g, escale, sum, out_row);
      if (threadIdx.x == 0) trace_add<TR>(kTrSumEpi, t1);
    }
  }
  return it;
}
#endif  // FP4MOE_SM90A

template <bool MX, bool TR>
__global__ void __launch_bounds__(kThreads, 1) decode_layer_kernel(const Params p) {
#if defined(FP4MOE_SM90A)
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ Groups G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = p.T * p.k;
  float* partials = reinterpret_cast<float*>(smem);
  uint8_t* act = smem + p.act_off;
  uint8_t* ring = smem + p.ring_off;
  if (threadIdx.x == 0) stamp<TR>(p, kTrStart);
  if (TR && threadIdx.x < kTrSumCount) s_trace_sum[threadIdx.x] = 0;

  // ---- 1. the slots' groups (warp 0; meanwhile the other consumer warps stage x) ----
  if (warp == kW && lane == 0) {
    for (int s = 0; s < p.stages; ++s) {
      ptx::mbarrier_init(smem_addr(&full[s]), 1);
      ptx::mbarrier_init(smem_addr(&empty[s]), 32 * kW);
    }
    ptx::fence_proxy_async_shared();  // the initialized barriers, visible to the bulk copies' complete_tx
  }
  if (warp == 0) {
    group_slots(p, n, G);
  } else if (warp < kW) {
    stage_x(p, act);
  }
  __syncthreads();
  if (threadIdx.x == 0) stamp<TR>(p, kTrSlots);

  const Mat m1(p.w13, p.kpw), m2(p.w2, p.kpw);
  int a0, a1, b0, b1;  // the CTA's units of GEMM 1 and GEMM 2
  share(G.count * m1.RP, a0, a1);
  share(G.count * m2.RP, b0, b1);
  const int n1 = (a1 - a0) * m1.chunks(), n2 = (b1 - b0) * m2.chunks();
  if (TR && threadIdx.x == 0) {
    stamp<TR>(p, kTrGroups);
    p.trace[size_t(blockIdx.x) * 2 * kTraceEvents + kTrUnits1] = uint64_t(a1 - a0);
    p.trace[size_t(blockIdx.x) * 2 * kTraceEvents + kTrUnits2] = uint64_t(b1 - b0);
  }

  if (warp == kW) {
    // ---- 2. the producer ----
    const int ahead = min(n2, p.stages);  // GEMM 2's stages issued before the first grid barrier
    if (lane == 0) {
      int it = 0;
      for (int u = a0; u < a1; ++u)
        for (int c = 0; c < m1.chunks(); ++c, ++it) {
          issue_stage<TR>(p, p.w13, m1, G.expert[u / m1.RP], u % m1.RP, c, it, p.stages, ring, full, empty);
          if (it == 0) stamp<TR>(p, kTrIssue1);
        }
      stamp<TR>(p, kTrIssued1);
      // GEMM 2's first `ahead` stages reuse slots of GEMM 1's stages (or none), which the
      // consumers release before they reach the barrier: these waits end before it.
      int i = 0;
      for (int u = b0; u < b1 && i < ahead; ++u)
        for (int c = 0; c < m2.chunks() && i < ahead; ++c, ++it, ++i)
          issue_stage<TR>(p, p.w2, m2, G.expert[u / m2.RP], u % m2.RP, c, it, p.stages, ring, full, empty);
      stamp<TR>(p, kTrIssuedAhead);
    }
    __syncwarp();
    grid_barrier(p.barrier, 1);
    if (lane == 0) {
      int it = n1, i = 0;
      for (int u = b0; u < b1; ++u)
        for (int c = 0; c < m2.chunks(); ++c, ++it, ++i)
          if (i >= ahead) issue_stage<TR>(p, p.w2, m2, G.expert[u / m2.RP], u % m2.RP, c, it, p.stages, ring, full, empty);
    }
    __syncwarp();
    grid_barrier(p.barrier, 2);
  } else {
    // ---- 3. GEMM 1 (x is in shared memory) ----
    auto x_row = [&](int gid, int col) { return act + size_t(G.slot[gid][col] / p.k) * p.x_row_bytes; };
    int it = 0;
    if (MX) it = consume<true, true, TR>(p, p.w13, G, a0, a1, it, ring, partials, full, empty, x_row);
    else it = consume<false, true, TR>(p, p.w13, G, a0, a1, it, ring, partials, full, empty, x_row);

    if (threadIdx.x == 0) stamp<TR>(p, kTrGemm1);
    grid_barrier(p.barrier, 1);
    if (threadIdx.x == 0) stamp<TR>(p, kTrBarrier1);

    // ---- 4. the h rows of the CTA's GEMM 2 groups, GEMM 2 ----
    const int Ip = p.w2.Kp;  // h's k-permuted rows
    const int gfirst = b1 > b0 ? b0 / m2.RP : 0, glast = b1 > b0 ? (b1 - 1) / m2.RP : -1;
    const int rows = glast >= gfirst ? G.off[glast + 1] - G.off[gfirst] : 0;
    for (int i = threadIdx.x; i < rows * (Ip / 8); i += kW * 32) {
      const int r = i / (Ip / 8), c = (i % (Ip / 8)) * 8;
      // row r: member r - off of the group it falls in
      int gi = gfirst;
      while (G.off[gi + 1] - G.off[gfirst] <= r) ++gi;
      const int slot = G.slot[gi][r - (G.off[gi] - G.off[gfirst])];
      // h: k-permuted rows of Ip (GEMM 1's epilogue wrote the zeros past I), copied as they are
      const uint4 v = __ldcg(reinterpret_cast<const uint4*>(p.h + size_t(slot) * Ip + c));
      *reinterpret_cast<uint4*>(act + size_t(r) * p.h_row_bytes + c * 2) = v;
    }
    ptx::named_barrier_sync(1, kW * 32);
    if (threadIdx.x == 0) stamp<TR>(p, kTrHLoaded);
    auto h_row = [&](int gid, int col) {
      return act + size_t(G.off[gid] - G.off[gfirst] + col) * p.h_row_bytes;
    };
    if (MX) consume<true, false, TR>(p, p.w2, G, b0, b1, it, ring, partials, full, empty, h_row);
    else consume<false, false, TR>(p, p.w2, G, b0, b1, it, ring, partials, full, empty, h_row);

    if (threadIdx.x == 0) stamp<TR>(p, kTrGemm2);
    grid_barrier(p.barrier, 2);
    if (threadIdx.x == 0) stamp<TR>(p, kTrBarrier2);
  }

  // ---- 5. the combine: kOutCols columns of one token per thread (combine.cu's arithmetic) ----
  const int H = p.w2.N;
  const size_t esize = p.out_dt == 0 ? 4 : 2;
  // (item i to CTA i % grid: the few items of the fewest tokens spread over the SMs)
  for (int i = int(threadIdx.x) * int(gridDim.x) + int(blockIdx.x); i < p.T * (H / kOutCols);
       i += int(gridDim.x) * kThreads) {
    const int tok = i / (H / kOutCols), c = (i % (H / kOutCols)) * kOutCols;
    void* o = static_cast<uint8_t*>(p.out) + size_t(tok * p.out_stride + c) * esize;
    float old[kOutCols];
    if (p.accumulate) read_out(o, p.out_dt, old);
    float acc[kOutCols] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j0 = 0; j0 < p.k; j0 += 8) {
      // the loads of 8 slots first (every slot's y row exists; those of slots not run are not read
      // into the sum), then the sums in slot order
      float4 yv[8];
      float wj[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int s = tok * p.k + min(j0 + j, p.k - 1);
        yv[j] = __ldcg(reinterpret_cast<const float4*>(p.y + size_t(s) * H + c));
        wj[j] = p.wts ? p.wts[s] : 1.0f;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j0 + j >= p.k || G.e[tok * p.k + j0 + j] < 0) continue;
        acc[0] = __fadd_rn(acc[0], __fmul_rn(wj[j], yv[j].x));
        acc[1] = __fadd_rn(acc[1], __fmul_rn(wj[j], yv[j].y));
        acc[2] = __fadd_rn(acc[2], __fmul_rn(wj[j], yv[j].z));
        acc[3] = __fadd_rn(acc[3], __fmul_rn(wj[j], yv[j].w));
      }
    }
    if (p.accumulate) {
#pragma unroll
      for (int q = 0; q < kOutCols; ++q) acc[q] = __fadd_rn(old[q], acc[q]);
    }
    write_out(o, p.out_dt, acc);
  }
  if constexpr (TR) {
    __syncthreads();
    if (threadIdx.x == 0) stamp<TR>(p, kTrEnd);
    if (threadIdx.x < kTrSumCount)
      p.trace[size_t(blockIdx.x) * 2 * kTraceEvents + kTrSums + threadIdx.x] = uint64_t(s_trace_sum[threadIdx.x]);
  }
#endif  // FP4MOE_SM90A
}

std::atomic<int64_t> g_launches{0};
std::atomic<int> g_tokens{-1};  // decode_layer_tokens: -1 not read yet

// FP4MOE_LAYER_TRACE=path: the stamps' device buffer (allocated at the first forward, one per
// process: a measuring aid for one device), written to path at exit.
struct Trace {
  uint64_t* dev = nullptr;
  int ctas = 0;
  std::string path;
};
Trace& trace() {
  static Trace t;
  return t;
}
void write_trace() {
  Trace& t = trace();
  std::vector<uint64_t> h(size_t(t.ctas) * 2 * kTraceEvents);
  if (cudaMemcpy(h.data(), t.dev, h.size() * 8, cudaMemcpyDeviceToHost) != cudaSuccess) return;
  if (FILE* f = std::fopen(t.path.c_str(), "w")) {
    for (int c = 0; c < t.ctas; ++c) {
      for (int i = 0; i < 2 * kTraceEvents; ++i)
        std::fprintf(f, "%s%llu", i ? " " : "", (unsigned long long)h[size_t(c) * 2 * kTraceEvents + i]);
      std::fprintf(f, "\n");
    }
    std::fclose(f);
  }
}
uint64_t* trace_buffer(int ctas, cudaStream_t stream) {
  Trace& t = trace();
  if (t.dev == nullptr) {
    static const char* const path = std::getenv("FP4MOE_LAYER_TRACE");  // (read once)
    if (path == nullptr || *path == 0) return nullptr;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    FP4MOE_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    if (cs != cudaStreamCaptureStatusNone) return nullptr;  // (allocated at an eager forward only)
    t.path = path;
    t.ctas = ctas;
    FP4MOE_CUDA_CHECK(cudaMalloc(&t.dev, size_t(ctas) * 2 * kTraceEvents * 8));
    FP4MOE_CUDA_CHECK(cudaMemset(t.dev, 0, size_t(ctas) * 2 * kTraceEvents * 8));
    std::atexit(write_trace);
  }
  return t.ctas >= ctas ? t.dev : nullptr;
}

int tokens_from_env() { return std::clamp(env_int("FP4MOE_DECODE_LAYER", kLayerDefaultTokens), 0, kLayerMaxTokens); }

// The shared memory plan of one forward: the activation region and the ring's stages.
struct Plan {
  std::string why;
  int stages = 0, batch = 0, kpw = 1, x_row_bytes = 0, h_row_bytes = 0;
  uint32_t act_off = 0, ring_off = 0, smem = 0;
  int grid = 0;
};

// The k-blocks per consumer warp and stage the plan prefers: FP4MOE_LAYER_KPW (1 or 2; a
// measuring aid, read once), else kDefaultKpw.
constexpr int kDefaultKpw = 2;
int kpw_choice() {
  static const int kpw = std::clamp(env_int("FP4MOE_LAYER_KPW", kDefaultKpw), 1, kMaxKpw);
  return kpw;
}

Plan plan(const CudaWeights& cw, int64_t T, int64_t k) {
  Plan pl;
  const int dev = cw.device;
  const int sms = multiprocessor_count(dev);
  const int64_t n = T * k;
  const int RP2 = (cw.w2.N / kFragRows + 1) / 2;
  // GEMM 2 rows of one CTA: its units span at most ceil(units per CTA / RP2) + 1 groups
  const int64_t units2 = (n * RP2 + sms - 1) / sms;
  const int64_t rows2 = std::min<int64_t>(n, ((units2 + RP2 - 1) / RP2 + 1) * kLayerGroupSlots);
  // +16 bytes a row: the rows' words fall in other banks
  pl.x_row_bytes = cw.w13.Kp * 2 + 16;
  pl.h_row_bytes = cw.w2.Kp * 2 + 16;
  const int64_t act_bytes = std::max<int64_t>(T * pl.x_row_bytes, rows2 * pl.h_row_bytes);
  int optin = 0;
  FP4MOE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const int sb = frag_scale_bytes(cw.w13.block);
  // The preferred k-blocks per warp and stage (kpw_choice), else 1; with it the largest batch of
  // units whose sums meet at once that leaves a ring of kGoodStages one-k-block stages' bytes
  // (fewer meetings), else the largest that leaves kMinStages; and never fewer than 2 stages.
  for (const int kpw : {kpw_choice(), 1}) {
    for (const int want : {kGoodStages, kMinStages}) {
      for (int batch = kMaxBatch; batch >= 1 && pl.batch == 0; --batch) {
        const uint32_t act_off = partial_bytes(batch);
        const uint32_t ring_off = uint32_t((act_off + act_bytes + 127) / 128 * 128);
        const int64_t room = int64_t(optin) - 2048 - ring_off;  // 2 KiB: the static tables
        const int stages =
            int(std::min<int64_t>(kMaxStages, std::max<int64_t>(0, room / stage_bytes(sb, kpw))));
        if (stages * kpw < want || stages < 2) continue;
        pl.batch = batch;
        pl.kpw = kpw;
        pl.stages = stages;
        pl.act_off = act_off;
        pl.ring_off = ring_off;
      }
    }
  }
  if (pl.batch == 0) {
    const int64_t room = int64_t(optin) - 2048 - (partial_bytes(1) + act_bytes);
    pl.stages = int(std::max<int64_t>(0, room / stage_bytes(sb, 1)));
    pl.why = "the activations (" + std::to_string(act_bytes) + " bytes) leave shared memory for " +
             std::to_string(pl.stages) + " stages, fewer than " + std::to_string(kMinStages);
    return pl;
  }
  pl.smem = pl.ring_off + uint32_t(pl.stages * stage_bytes(sb, pl.kpw));
  pl.grid = sms;
  return pl;
}

using Kernel = void (*)(Params);
// The kernel of a format (MXFP4: mx) with or without the stamps (FP4MOE_LAYER_TRACE).
Kernel kernel_of(bool mx, bool traced) {
  if (mx) return traced ? decode_layer_kernel<true, true> : decode_layer_kernel<true, false>;
  return traced ? decode_layer_kernel<false, true> : decode_layer_kernel<false, false>;
}

std::string kernel_ready(Kernel kern, int dev, uint32_t smem) {
  FP4MOE_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  FP4MOE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, smem));
  if (per_sm < 1) return "its CTA does not fit an SM";
  return "";
}

}  // namespace

int decode_layer_tokens() { return choice_once(g_tokens, tokens_from_env); }

void set_decode_layer_tokens(int tokens) {
  g_tokens.store(tokens < 0 ? tokens_from_env() : std::min(tokens, kLayerMaxTokens), std::memory_order_relaxed);
}

int64_t decode_layer_launches() { return g_launches.load(std::memory_order_relaxed); }

std::string decode_layer_why_no_device(int device) {
  const int cc = compute_capability(device);
  if (cc != 90) return "device " + std::to_string(device) + " is sm_" + std::to_string(cc) + ", it needs sm_90";
  if (std::string(compiled_archs()).find("sm_90a") == std::string::npos) return "this build has no sm_90a code";
  int coop = 0;
  FP4MOE_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  if (!coop) return "the device has no cooperative launch";
  return "";
}

namespace {

// decode_layer_why_not, with the shared memory plan it ends on (pl.why is its answer then).
Plan check(const CudaWeights& cw, int64_t T, int64_t k, bool w4a4_values) {
  Plan no;
  auto why = [&no](std::string s) {
    no.why = std::move(s);
    return no;
  };
  const int tokens = decode_layer_tokens();
  if (tokens == 0) return why("off (FP4MOE_DECODE_LAYER=0)");
  if (T > tokens) return why(std::to_string(T) + " tokens, more than " + std::to_string(tokens));
  if (T * k > kLayerMaxSlots)
    return why(std::to_string(T * k) + " slots, more than " + std::to_string(kLayerMaxSlots));
  if (gemm_path() != GemmPath::sm90) return why("a GEMM path was forced (FP4MOE_GEMM)");
  if (cw.desc.act_quant == ActQuant::nvfp4 && !w4a4_values) return why("W4A4 without its activations as values");
  if (std::string d = decode_layer_why_no_device(cw.device); !d.empty()) return why(d);
  if (cw.w13.N % (2 * kFragRows) != 0) return why("I is not a multiple of 16");
  return plan(cw, T, k);
}

}  // namespace

std::string decode_layer_why_not(const DeviceWeights& w, int64_t T, int64_t k, bool w4a4_values) {
  return check(static_cast<const CudaWeights&>(w), T, k, w4a4_values).why;
}

bool decode_layer(const DeviceWeights& w, const DecodeLayerArgs& a, cudaStream_t stream) {
  const auto& cw = static_cast<const CudaWeights&>(w);
  const Plan pl = check(cw, a.T, a.k, a.w4a4);
  if (!pl.why.empty()) return false;
  uint64_t* const stamps = trace_buffer(pl.grid, stream);
  const Kernel kern = kernel_of(cw.w13.block == 32, stamps != nullptr);
  if (!kernel_ready(kern, cw.device, pl.smem).empty()) return false;

  Params p{};
  p.w13 = cw.w13;
  p.w2 = cw.w2;
  p.x.x = a.x;
  p.x.dtype = value_dtype_code(a.x_dtype, "activations");
  p.x.rows = a.T;
  p.x.K = cw.desc.hidden;
  p.x.row_stride = a.x_stride;
  p.x.row_weight = a.weight_on_input ? a.topk_weights : nullptr;
  p.x.weight_stride = 1;
  p.x.to_bf16 = true;
  p.w4a4 = a.w4a4;
  p.gs1 = 1.0f / a.a13_dq;
  p.mult1 = a.w4a4 ? a.a13_dq : 1.0f;
  p.mult2 = a.w4a4 ? a.a2_dq : 1.0f;
  p.epi1.act = cw.desc.activation;
  p.epi1.alpha = cw.desc.swiglu_alpha;
  p.epi1.limit = cw.desc.swiglu_limit;
  if (a.w4a4) {
    p.epi1.h_values = a.h;
    p.epi1.h_gs = 1.0f / a.a2_dq;
  } else {
    p.epi1.h_bf16 = a.h;
  }
  p.epi2.y = a.y;
  p.ids = a.topk_ids;
  p.wts = a.weight_on_input ? nullptr : a.topk_weights;
  p.map = a.expert_map;
  p.E = a.E;
  p.T = int(a.T);
  p.k = int(a.k);
  p.status = a.status;
  p.barrier = a.barrier;
  p.h = a.h;
  p.y = a.y;
  p.out = a.out;
  p.out_dt = value_dtype_code(a.out_dtype, "out");
  p.out_stride = a.out_stride;
  p.accumulate = a.accumulate;
  p.stages = pl.stages;
  p.batch = pl.batch;
  p.kpw = pl.kpw;
  p.x_row_bytes = pl.x_row_bytes;
  p.h_row_bytes = pl.h_row_bytes;
  p.act_off = pl.act_off;
  p.ring_off = pl.ring_off;
  p.trace = stamps;
  static const int probe = env_int("FP4MOE_LAYER_PROBE", 0);  // (read once)
  p.probe = probe;

  FP4MOE_CUDA_CHECK(cudaMemsetAsync(a.barrier, 0, sizeof(unsigned), stream));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(pl.grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = pl.smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  FP4MOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, p));
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (gemm_log_on()) {
    char line[256];
    std::snprintf(line, sizeof line, "decode layer T=%lld k=%lld H=%d I=%d: one kernel, %d CTAs, %d stages of %d k-blocks, batches of %d units, %u B shared",
                  (long long)a.T, (long long)a.k, cw.w2.N, cw.w2.K, pl.grid, pl.stages, kW * pl.kpw, pl.batch, pl.smem);
    gemm_log(line);
  }
  return true;
}

}  // namespace fp4moe::cuda
