// The one-kernel layer at the fewest tokens (decode_layer.hpp says what and why).
//
// The kernel, one CTA per SM, all resident (a cooperative launch), 16 consumer warps and one
// producer warp:
//   1. Every CTA groups the T * k top-k slots by local expert (slots in order, at most
//      kLayerGroupSlots per group; ids outside [-1, E) and experts not local join none; CTA 0
//      writes the status word) and takes its share of the units: GEMM 1's (group, row pair) and
//      GEMM 2's, each GEMM's units cut evenly over the CTAs in order.
//   2. The producer's lane 0 streams the CTA's units' weights through a ring of stages by bulk
//      copies (cp.async.bulk, complete_tx on the stage's mbarrier): a stage is up to 16
//      k-blocks of one unit's two fragment rows, their fragment blocks and scale bytes
//      contiguous in the weight layout (gemm_internal.hpp), four copies per stage. It goes on
//      into GEMM 2's first stages (as many as the ring holds) while the consumers finish GEMM 1.
//   3. The consumers write x as GEMM 1's bf16 input (W4A4: its NVFP4 values) into shared
//      memory, then run GEMM 1: consumer warp w takes k-block w of each stage (the decode
//      kernel's weight decode and mma.m16n8k16, swap-AB: the group's slots are the n8
//      columns), keeping its own fp32 sums per unit; at a unit's end the 16 warps' sums meet in
//      shared memory and one warp adds them in warp order and runs the fast path's GEMM 1
//      epilogue (bias, activation, bf16 or NVFP4 requantization), h rows by slot.
//   4. Grid barrier. The consumers load the h rows of their GEMM 2 units into shared memory and
//      run GEMM 2 alike (the epilogue writes y rows by slot, fp32).
//   5. Grid barrier. Every thread of the grid combines a share of out's columns: combine.cu's
//      arithmetic (slots in order, products and sums not fused, then out added when
//      accumulating).
// No float atomics: each sum's order is fixed by the shape and the grid (the SM count).
#include <algorithm>
#include <atomic>
#include <cstdio>

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
constexpr int kAccFloats = 8;  // a lane's sums of one unit: 2 m-tiles x one n8 tile x 4
constexpr int kPartialBytes = 2 * kW * kAccFloats * 32 * 4;  // two units' sums, all warps
constexpr int kFragBytes = kFragWords * 4;                   // 512

// A stage: [fragment row 0: kW blocks][row 1: kW blocks][row 0's scales: kW x sb][row 1's]
__host__ __device__ constexpr int stage_bytes(int sb) { return 2 * kW * (kFragBytes + sb); }

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
  int x_row_bytes, h_row_bytes;  // per x / h row in shared memory
  uint32_t act_off, ring_off;  // dynamic shared memory offsets
};

#if defined(FP4MOE_LAYER_WATCHDOG)
__device__ int g_layer_abort = 0;  // (declared for every target: the host stub names it)
#endif

#if defined(FP4MOE_SM90A)
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
  bool lead[kLayerMaxSlots];  // slot s starts a group
  int count;                  // groups
  int expert[kLayerMaxSlots];                  // group g's local expert
  int8_t slot[kLayerMaxSlots][kLayerGroupSlots];  // its slots in order, -1 past them
  int off[kLayerMaxSlots + 1];                 // prefix of the groups' slot counts
};

// Units [u0, u1) of a GEMM with `total` units: the CTA's even share, in order.
__device__ __forceinline__ void share(int total, int& u0, int& u1) {
  u0 = int(int64_t(total) * blockIdx.x / gridDim.x);
  u1 = int(int64_t(total) * (blockIdx.x + 1) / gridDim.x);
}

struct Mat {
  int KB, NB, RP, sb;
  __device__ explicit Mat(const WeightMatrix& w)
      : KB(w.Kp / kFragK), NB(w.N / kFragRows), RP((w.N / kFragRows + 1) / 2), sb(frag_scale_bytes(w.block)) {}
  __device__ int chunks() const { return (KB + kW - 1) / kW; }
};

// The producer's stage `it` (unit of group gid, row pair rp, chunk c of `m`): waits for the
// slot, then its four copies.
__device__ __forceinline__ void issue_stage(const WeightMatrix& w, const Mat& m, int e, int rp, int c, int it,
                                            int stages, uint8_t* ring, uint64_t* full, uint64_t* empty) {
  const int s = it % stages;
  wait_parity(smem_addr(&empty[s]), ((it / stages) & 1) ^ 1, 0, it);
  const int kb0 = c * kW, nk = min(kW, m.KB - kb0);
  const uint32_t bar = smem_addr(&full[s]);
  ptx::mbarrier_expect_tx(bar, uint32_t(2 * nk * (kFragBytes + m.sb)));
  uint8_t* st = ring + size_t(s) * stage_bytes(m.sb);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const int64_t blk = (int64_t(e) * m.NB + min(2 * rp + mt, m.NB - 1)) * m.KB + kb0;
    bulk_load(smem_addr(st + mt * kW * kFragBytes), w.q + blk * kFragWords, uint32_t(nk * kFragBytes), bar);
    bulk_load(smem_addr(st + 2 * kW * kFragBytes + mt * kW * m.sb), w.scale + blk * m.sb, uint32_t(nk * m.sb), bar);
  }
  ptx::mbarrier_arrive(bar);
}

// A consumer warp's part of one GEMM: its units' stages from `it` on; returns the stage count
// after them. act_row(gid, col): the shared-memory activation row of column col of group gid.
template <bool MX, bool GEMM1, class ActRow>
__device__ __forceinline__ int consume(const Params& p, const WeightMatrix& w, const Groups& G, int u0, int u1,
                                       int it, uint8_t* ring, float* partials, uint64_t* full, uint64_t* empty,
                                       ActRow act_row) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const Mat m(w);
  const uint32_t decode_low = sm80::decode_table(w);
  const int nch = m.chunks();
  for (int u = u0; u < u1; ++u) {
    const int gid = u / m.RP, rp = u % m.RP, e = G.expert[gid];
    const int col = G.slot[gid][g] >= 0 ? g : 0;
    const uint8_t* arow = act_row(gid, col);
    float acc[2][1][4];
    sm80::zero_acc<1>(acc);
    for (int c = 0; c < nch; ++c, ++it) {
      const int s = it % p.stages;
      wait_parity(smem_addr(&full[s]), (it / p.stages) & 1, GEMM1 ? 1 : 2, it);
      const int kb = c * kW + warp;
      if (kb < m.KB) {
        const uint8_t* st = ring + size_t(s) * stage_bytes(m.sb);
        uint4 wq[2];
        uint2 ws[2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          wq[mt] = *reinterpret_cast<const uint4*>(st + (mt * kW + warp) * kFragBytes + lane * 16);
          const uint8_t* sp = st + 2 * kW * kFragBytes + (mt * kW + warp) * m.sb + g * (m.sb / 8);
          ws[mt] = MX ? make_uint2(*reinterpret_cast<const uint32_t*>(sp), 0u) : *reinterpret_cast<const uint2*>(sp);
        }
        const uint32_t* b = reinterpret_cast<const uint32_t*>(arow + kb * kFragK * 2) + t;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            uint32_t a[4];
            sm80::weight_a_frag(a, wq[mt], ws[mt], kk, MX, decode_low);
            ptx::mma_m16n8k16_bf16(acc[mt][0], a, b[kk * 8], b[kk * 8 + 4]);
          }
      }
      __syncwarp();
      if (lane == 0) ptx::mbarrier_arrive(smem_addr(&empty[s]));
    }
    // the 16 warps' sums of the unit meet; warp (u - u0) % kW adds them in warp order
    const int n = u - u0;
    float* buf = partials + (n & 1) * (kW * kAccFloats * 32);
    const float (&flat)[kAccFloats] = reinterpret_cast<const float (&)[kAccFloats]>(acc);
#pragma unroll
    for (int i = 0; i < kAccFloats; ++i) buf[(warp * kAccFloats + i) * 32 + lane] = flat[i];
    ptx::named_barrier_sync(1, kW * 32);
    if (warp == n % kW) {
      float sum[2][1][4];
      float (&sf)[kAccFloats] = reinterpret_cast<float (&)[kAccFloats]>(sum);
#pragma unroll
      for (int i = 0; i < kAccFloats; ++i) sf[i] = buf[i * 32 + lane];
      for (int v = 1; v < kW; ++v)
#pragma unroll
        for (int i = 0; i < kAccFloats; ++i) sf[i] += buf[(v * kAccFloats + i) * 32 + lane];
      auto out_row = [&](int, int cc) -> int64_t { return G.slot[gid][2 * t + cc]; };
      if constexpr (GEMM1) sm80::epilogue_gemm1<1>(p.epi1, w, e, 2 * rp, g, w.epi[e] * p.mult1, sum, out_row);
      else sm80::epilogue_gemm2<1>(p.epi2, w, e, 2 * rp, g, w.epi[e] * p.mult2, sum, out_row);
    }
  }
  return it;
}
#endif  // FP4MOE_SM90A

template <bool MX>
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

  // ---- 1. the slots' groups ----
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      ptx::mbarrier_init(smem_addr(&full[s]), 1);
      ptx::mbarrier_init(smem_addr(&empty[s]), kW);
    }
    ptx::fence_proxy_async_shared();  // the initialized barriers, visible to the bulk copies' complete_tx
  }
  if (threadIdx.x < n) G.e[threadIdx.x] = local_expert(p.ids[threadIdx.x], p.map, p.E, p.w13.num_experts);
  if (blockIdx.x == 0 && warp == 0) {
    bool bad = false;
    for (int s = lane; s < n; s += 32) bad |= p.ids[s] < -1 || p.ids[s] >= p.E;
    const bool any_bad = __any_sync(0xFFFFFFFFu, bad);  // (every lane: the vote's mask names them all)
    if (lane == 0) *p.status = any_bad ? kStatusBadId : 0u;
  }
  __syncthreads();
  int occ = 0;
  if (threadIdx.x < n) {
    const int e = G.e[threadIdx.x];
    for (int j = 0; j < int(threadIdx.x); ++j) occ += G.e[j] == e;
    G.lead[threadIdx.x] = e >= 0 && occ % kLayerGroupSlots == 0;
  }
  __syncthreads();
  if (threadIdx.x < n && G.lead[threadIdx.x]) {
    int gid = 0;
    for (int j = 0; j < int(threadIdx.x); ++j) gid += G.lead[j];
    G.expert[gid] = G.e[threadIdx.x];
#pragma unroll
    for (int c = 0; c < kLayerGroupSlots; ++c) G.slot[gid][c] = -1;
  }
  __syncthreads();
  if (threadIdx.x < n && G.e[threadIdx.x] >= 0) {
    // this slot's group: that of the slot that starts it (the same expert, occ rounded down)
    const int e = G.e[threadIdx.x], want = occ - occ % kLayerGroupSlots;
    int seen = 0, leader = 0;
    for (int j = 0; j < int(threadIdx.x); ++j)
      if (G.e[j] == e) {
        if (seen == want) leader = j;
        ++seen;
      }
    if (want == occ) leader = threadIdx.x;
    int gid = 0;
    for (int j = 0; j < leader; ++j) gid += G.lead[j];
    G.slot[gid][occ % kLayerGroupSlots] = int8_t(threadIdx.x);
  }
  if (threadIdx.x == 0) {
    int groups = 0;
    for (int j = 0; j < n; ++j) groups += G.lead[j];
    G.count = groups;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    G.off[0] = 0;
    for (int gi = 0; gi < G.count; ++gi) {
      int c = 0;
      while (c < kLayerGroupSlots && G.slot[gi][c] >= 0) ++c;
      G.off[gi + 1] = G.off[gi] + c;
    }
  }
  __syncthreads();

  const Mat m1(p.w13), m2(p.w2);
  int a0, a1, b0, b1;  // the CTA's units of GEMM 1 and GEMM 2
  share(G.count * m1.RP, a0, a1);
  share(G.count * m2.RP, b0, b1);
  const int n1 = (a1 - a0) * m1.chunks(), n2 = (b1 - b0) * m2.chunks();

  if (warp == kW) {
    // ---- 2. the producer ----
    const int ahead = min(n2, p.stages);  // GEMM 2's stages issued before the first grid barrier
    if (lane == 0) {
      int it = 0;
      for (int u = a0; u < a1; ++u)
        for (int c = 0; c < m1.chunks(); ++c, ++it)
          issue_stage(p.w13, m1, G.expert[u / m1.RP], u % m1.RP, c, it, p.stages, ring, full, empty);
      // GEMM 2's first `ahead` stages reuse slots of GEMM 1's stages (or none), which the
      // consumers release before they reach the barrier: these waits end before it.
      int i = 0;
      for (int u = b0; u < b1 && i < ahead; ++u)
        for (int c = 0; c < m2.chunks() && i < ahead; ++c, ++it, ++i)
          issue_stage(p.w2, m2, G.expert[u / m2.RP], u % m2.RP, c, it, p.stages, ring, full, empty);
    }
    __syncwarp();
    grid_barrier(p.barrier, 1);
    if (lane == 0) {
      int it = n1, i = 0;
      for (int u = b0; u < b1; ++u)
        for (int c = 0; c < m2.chunks(); ++c, ++it, ++i)
          if (i >= ahead) issue_stage(p.w2, m2, G.expert[u / m2.RP], u % m2.RP, c, it, p.stages, ring, full, empty);
    }
    __syncwarp();
    grid_barrier(p.barrier, 2);
  } else {
    // ---- 3. x into shared memory, GEMM 1 ----
    const int K1 = p.w13.K, Kp1 = p.w13.Kp;
    if (p.w4a4) {
      for (int i = threadIdx.x; i < p.T * (Kp1 / kNvfp4Block); i += kW * 32) {
        const int r = i / (Kp1 / kNvfp4Block), b = i % (Kp1 / kNvfp4Block);
        uint4* o = reinterpret_cast<uint4*>(act + size_t(r) * p.x_row_bytes + b * kNvfp4Block * 2);
        if (b * kNvfp4Block >= K1) {
          o[0] = o[1] = make_uint4(0u, 0u, 0u, 0u);
          continue;
        }
        uint32_t lo, hi, v[4];
        const float sc = e4m3_to_f32(act::quantize_block(p.x, r, b, p.gs1, lo, hi));
        nvfp4_values_bf16x8(lo, sc, v);
        o[0] = make_uint4(v[0], v[1], v[2], v[3]);
        nvfp4_values_bf16x8(hi, sc, v);
        o[1] = make_uint4(v[0], v[1], v[2], v[3]);
      }
    } else {
      for (int i = threadIdx.x; i < p.T * (Kp1 / 8); i += kW * 32) {
        const int r = i / (Kp1 / 8), c = (i % (Kp1 / 8)) * 8;
        uint32_t wd[4] = {0u, 0u, 0u, 0u};
        if (c < K1) {
          float v[8];
          act::load_row<8>(p.x, r, c, v);
#pragma unroll
          for (int j = 0; j < 4; ++j)
            wd[j] = uint32_t(bf16_from_f32(v[2 * j])) | (uint32_t(bf16_from_f32(v[2 * j + 1])) << 16);
        }
        *reinterpret_cast<uint4*>(act + size_t(r) * p.x_row_bytes + c * 2) = make_uint4(wd[0], wd[1], wd[2], wd[3]);
      }
    }
    ptx::named_barrier_sync(1, kW * 32);
    auto x_row = [&](int gid, int col) { return act + size_t(G.slot[gid][col] / p.k) * p.x_row_bytes; };
    int it = 0;
    if (MX) it = consume<true, true>(p, p.w13, G, a0, a1, it, ring, partials, full, empty, x_row);
    else it = consume<false, true>(p, p.w13, G, a0, a1, it, ring, partials, full, empty, x_row);

    grid_barrier(p.barrier, 1);

    // ---- 4. the h rows of the CTA's GEMM 2 groups, GEMM 2 ----
    const int I = p.w2.K, Ip = p.w2.Kp;
    const int gfirst = b1 > b0 ? b0 / m2.RP : 0, glast = b1 > b0 ? (b1 - 1) / m2.RP : -1;
    const int rows = glast >= gfirst ? G.off[glast + 1] - G.off[gfirst] : 0;
    for (int i = threadIdx.x; i < rows * (Ip / 8); i += kW * 32) {
      const int r = i / (Ip / 8), c = (i % (Ip / 8)) * 8;
      // row r: member r - off of the group it falls in
      int gi = gfirst;
      while (G.off[gi + 1] - G.off[gfirst] <= r) ++gi;
      const int slot = G.slot[gi][r - (G.off[gi] - G.off[gfirst])];
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (c < I) v = __ldcg(reinterpret_cast<const uint4*>(p.h + size_t(slot) * I + c));
      *reinterpret_cast<uint4*>(act + size_t(r) * p.h_row_bytes + c * 2) = v;
    }
    ptx::named_barrier_sync(1, kW * 32);
    auto h_row = [&](int gid, int col) {
      return act + size_t(G.off[gid] - G.off[gfirst] + col) * p.h_row_bytes;
    };
    if (MX) consume<true, false>(p, p.w2, G, b0, b1, it, ring, partials, full, empty, h_row);
    else consume<false, false>(p, p.w2, G, b0, b1, it, ring, partials, full, empty, h_row);

    grid_barrier(p.barrier, 2);
  }

  // ---- 5. the combine: kOutCols columns of one token per thread (combine.cu's arithmetic) ----
  const int H = p.w2.N;
  const size_t esize = p.out_dt == 0 ? 4 : 2;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < int64_t(p.T) * (H / kOutCols);
       i += int64_t(gridDim.x) * kThreads) {
    const int tok = int(i / (H / kOutCols)), c = int(i % (H / kOutCols)) * kOutCols;
    float acc[kOutCols] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < p.k; ++j) {
      const int s = tok * p.k + j;
      if (G.e[s] < 0) continue;
      const float wj = p.wts ? p.wts[s] : 1.0f;
      const float4 yv = __ldcg(reinterpret_cast<const float4*>(p.y + size_t(s) * H + c));
      acc[0] = __fadd_rn(acc[0], __fmul_rn(wj, yv.x));
      acc[1] = __fadd_rn(acc[1], __fmul_rn(wj, yv.y));
      acc[2] = __fadd_rn(acc[2], __fmul_rn(wj, yv.z));
      acc[3] = __fadd_rn(acc[3], __fmul_rn(wj, yv.w));
    }
    void* o = static_cast<uint8_t*>(p.out) + size_t(tok * p.out_stride + c) * esize;
    if (p.accumulate) {
      float old[kOutCols];
      read_out(o, p.out_dt, old);
#pragma unroll
      for (int q = 0; q < kOutCols; ++q) acc[q] = __fadd_rn(old[q], acc[q]);
    }
    write_out(o, p.out_dt, acc);
  }
#endif  // FP4MOE_SM90A
}

std::atomic<int64_t> g_launches{0};
std::atomic<int> g_tokens{-1};  // decode_layer_tokens: -1 not read yet

int tokens_from_env() { return std::clamp(env_int("FP4MOE_DECODE_LAYER", kLayerDefaultTokens), 0, kLayerMaxTokens); }

// The shared memory plan of one forward: the activation region and the ring's stages.
struct Plan {
  std::string why;
  int stages = 0, x_row_bytes = 0, h_row_bytes = 0;
  uint32_t act_off = 0, ring_off = 0, smem = 0;
  int grid = 0;
};

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
  pl.act_off = kPartialBytes;
  pl.ring_off = uint32_t((pl.act_off + act_bytes + 127) / 128 * 128);
  int optin = 0;
  FP4MOE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const int sb = frag_scale_bytes(cw.w13.block);
  const int64_t room = int64_t(optin) - 2048 - pl.ring_off;  // 2 KiB: the static tables
  pl.stages = int(std::min<int64_t>(kMaxStages, std::max<int64_t>(0, room / stage_bytes(sb))));
  if (pl.stages < kMinStages) {
    pl.why = "the activations (" + std::to_string(act_bytes) + " bytes) leave shared memory for " +
             std::to_string(pl.stages) + " stages, fewer than " + std::to_string(kMinStages);
    return pl;
  }
  pl.smem = pl.ring_off + uint32_t(pl.stages * stage_bytes(sb));
  pl.grid = sms;
  return pl;
}

template <bool MX>
std::string kernel_ready(int dev, uint32_t smem) {
  auto kern = decode_layer_kernel<MX>;
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
  const bool mx = cw.w13.block == 32;
  if (const std::string why = mx ? kernel_ready<true>(cw.device, pl.smem) : kernel_ready<false>(cw.device, pl.smem);
      !why.empty())
    return false;

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
  p.x_row_bytes = pl.x_row_bytes;
  p.h_row_bytes = pl.h_row_bytes;
  p.act_off = pl.act_off;
  p.ring_off = pl.ring_off;

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
  if (mx) FP4MOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_layer_kernel<true>, p));
  else FP4MOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_layer_kernel<false>, p));
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (gemm_log_on()) {
    char line[256];
    std::snprintf(line, sizeof line, "decode layer T=%lld k=%lld H=%d I=%d: one kernel, %d CTAs, %d stages, %u B shared",
                  (long long)a.T, (long long)a.k, cw.w2.N, cw.w2.K, pl.grid, pl.stages, pl.smem);
    gemm_log(line);
  }
  return true;
}

}  // namespace fp4moe::cuda
