// Permutation of routed slots into per-expert row ranges (pipeline.hpp), deterministic
// whatever the scheduling. A slot's position is its expert's first row, plus the slots of
// that expert in earlier chunks (count + scan), in earlier warps of its chunk (the chunk's
// per-warp counters) and in its warp's earlier steps and lower lanes (the walk: one warp
// walks its slots 32 at a time in slot order, and inside each step __match_any_sync groups
// lanes by expert, so that a lane's rank among its peers is the popcount of the lower peer
// lanes). Counts are shared-memory integer atomics; no atomic decides an order.
//
//   up to permute_fused_slots():   permute_fused          1 launch, one warp
//   up to permute_block_slots():   permute_block          1 launch, one CTA of up to 32 warps
//   otherwise:                     count -> scan -> place  3 launches, one CTA per chunk
// (permute_path in pipeline.hpp.) The status word is zeroed first: by the one-kernel paths'
// thread 0, else by a memset before the three. The memset node it saves at decode sizes cost,
// on the H200 at T = 1 (µs per layer): qwen3-30b 25.6 -> 24.0, gpt-oss-120b 37.7 -> 36.1,
// kimi-k2 82.6 -> 81.2. The block kernel does the chunked path's work in one CTA: per warp what
// permute_place does, with the counts' scan over the warps and experts in between, in place of
// a memset node, permute_count and permute_scan (~10 µs at kimi-k2 T = 128-512 by the ncu
// times below, before the launch gaps).
//
// H200, kimi-k2 (ncu, µs, count + scan + place): T = 128 3.1 + 3.9 + 6.1, T = 512 3.4 + 3.9 +
// 5.9, T = 16384 3.6 + 19.7 + 6.9; fused 7.5 at T = 16. One warp per 1024-slot chunk took 37.7
// (fused) at T = 128, 26.3 + 4.1 + 29.4 at T = 512 and 26.7 + 19.3 + 30.5 at T = 16384: each
// 32-slot step of a walk cost ~0.8 µs (dependent loads, the match, a 64-bit division).
#include <algorithm>
#include <atomic>
#include <climits>

#include "cuda/common/check.hpp"
#include "cuda/common/env.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/local_expert.cuh"
#include "cuda/pipeline.hpp"

namespace fp4moe::cuda {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int64_t kMaxLocal = 12000;  // scan's int[L] + int[32] stay under 48 KiB
constexpr int kCountThreads = 256;
constexpr int kPlaceGroup = 4;  // steps of 32 slots whose loads permute_place issues together

// The local expert of topk id `id`, or -1 (local_expert); `report`: an id outside [-1, E) sets
// kStatusBadId.
__device__ __forceinline__ int local_of(int32_t id, const int32_t* __restrict__ map, int64_t E, int64_t num_local,
                                        uint32_t* status, bool report) {
  if (report && (id < -1 || id >= E)) atomicOr(status, kStatusBadId);
  return local_expert(id, map, E, num_local);
}

__device__ __forceinline__ unsigned lanemask_lt() {
  return (1u << (threadIdx.x & 31)) - 1u;
}

// One warp's local experts of kG steps of 32 slots from base (-1 at or past s1): the ids
// first, then their map entries, so that the loads of a group are in flight together.
template <int kG>
__device__ __forceinline__ void load_locals(const PermuteArgs& a, int64_t base, int64_t s1, int (&le)[kG],
                                            bool report) {
  const int lane = threadIdx.x & 31;
  int32_t id[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const int64_t s = base + 32 * g + lane;
    id[g] = s < s1 ? a.topk_ids[s] : -1;
  }
#pragma unroll
  for (int g = 0; g < kG; ++g) le[g] = local_of(id[g], a.expert_map, a.E, a.num_local, a.status, report);
}

// One warp: hist[e] += number of slots of expert e in [s0, s1). hist in shared memory.
template <int kG>
__device__ void warp_count(const PermuteArgs& a, int64_t s0, int64_t s1, int* hist, bool report) {
  for (int64_t base = s0; base < s1; base += 32 * kG) {
    int le[kG];
    load_locals<kG>(a, base, s1, le, report);
#pragma unroll
    for (int g = 0; g < kG; ++g)
      if (le[g] >= 0) atomicAdd(&hist[le[g]], 1);
  }
}

// One warp: place the slots of [s0, s1) at next[e], next[e]+1, ... in slot order.
template <int kG>
__device__ void warp_place(const PermuteArgs& a, int64_t s0, int64_t s1, int* next) {
  const int lane = threadIdx.x & 31;
  const uint32_t k = uint32_t(a.k);  // T * k < 2^31 (permute checks it)
  for (int64_t base = s0; base < s1; base += 32 * kG) {
    int le[kG];
    load_locals<kG>(a, base, s1, le, false);
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const int64_t s = base + 32 * g + lane;
      const unsigned peers = __match_any_sync(kFull, le[g]);
      const unsigned below = peers & lanemask_lt();
      int pos = -1;
      if (le[g] >= 0) {
        pos = next[le[g]] + __popc(below);
        a.row_token[pos] = int32_t(uint32_t(s) / k);
      }
      if (s < s1) a.slot_row[s] = pos;
      __syncwarp();  // every lane has read next[le] before the leader moves it
      if (le[g] >= 0 && below == 0) next[le[g]] += __popc(peers);
      __syncwarp();
    }
  }
}

// Exclusive scan of v over the 32 lanes of a warp.
__device__ __forceinline__ int warp_exclusive_scan(int v) { return ptx::warp_inclusive_sum(v, threadIdx.x & 31) - v; }

// Exclusive scan of v over the CTA's threads in thread order (blockDim.x a multiple of 32, all
// threads calling); warp_sum: int[32] of shared memory, used once.
__device__ int block_exclusive_scan(int v, int* warp_sum) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int in_warp = warp_exclusive_scan(v);
  if (lane == 31) warp_sum[warp] = in_warp + v;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x / 32;
    const int x = lane < nw ? warp_sum[lane] : 0;
    const int ex = warp_exclusive_scan(x);
    if (lane < nw) warp_sum[lane] = ex;
  }
  __syncthreads();
  return warp_sum[warp] + in_warp;
}

// At most kPermuteFusedSlots slots: one warp counts, scans and places. shared: int[num_local].
__global__ void permute_fused(PermuteArgs a) {
  extern __shared__ int hist[];
  const int lane = threadIdx.x;
  const int64_t L = a.num_local, N = a.T * a.k;
  ptx::grid_dependency_trigger();  // GEMM 1, the dependent, launches now and waits for this grid's end
  if (lane == 0) *a.status = 0;  // ordered before warp_count's atomicOr by the __syncwarp below
  for (int64_t e = lane; e < L; e += 32) hist[e] = 0;
  __syncwarp();
  warp_count<1>(a, 0, N, hist, true);
  __syncwarp();
  // each lane scans a contiguous segment of experts
  const int64_t seg = (L + 31) / 32;
  const int64_t e0 = std::min<int64_t>(L, lane * seg), e1 = std::min<int64_t>(L, e0 + seg);
  int sum = 0;
  for (int64_t e = e0; e < e1; ++e) sum += hist[e];
  int run = warp_exclusive_scan(sum);
  for (int64_t e = e0; e < e1; ++e) {
    const int c = hist[e];
    a.begin[e] = run;
    a.count[e] = c;
    hist[e] = run;  // becomes the next free position of expert e
    run += c;
  }
  __syncwarp();
  warp_place<1>(a, 0, N, hist);
  // As the dependent of the activation preparation (PermuteArgs::dependent): this grid ends
  // after that one, so GEMM 1's wait for this grid covers it. Immediate when launched normally.
  ptx::grid_dependency_wait();
}

// Up to kPermuteBlockSlots slots: one CTA, warp w walks slots [w * warp_slots, + warp_slots).
// Each warp counts its slots per expert (its own counters); every expert's total over the warps
// is scanned over the experts (begin / count) and split into each warp's first position; each
// warp places its slots. shared: int[warps][num_local] + int[32].
__global__ void __launch_bounds__(1024) permute_block(PermuteArgs a, int64_t warp_slots) {
  extern __shared__ int smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int64_t L = a.num_local, N = a.T * a.k;
  int* const mine = smem + warp * L;  // the warp's counts, then its next free position per expert
  int* const warp_sum = smem + warps * L;
  ptx::grid_dependency_trigger();  // as in permute_fused
  if (threadIdx.x == 0) *a.status = 0;  // ordered before warp_count's atomicOr by the __syncthreads below
  for (int64_t i = threadIdx.x; i < warps * L; i += blockDim.x) smem[i] = 0;
  __syncthreads();
  const int64_t s0 = warp * warp_slots, s1 = std::min<int64_t>(N, s0 + warp_slots);
  warp_count<kPlaceGroup>(a, s0, s1, mine, true);
  __syncthreads();
  // each thread a contiguous segment of experts (consecutive threads, consecutive experts)
  const int64_t seg = (L + blockDim.x - 1) / blockDim.x;
  const int64_t e0 = std::min<int64_t>(L, threadIdx.x * seg), e1 = std::min<int64_t>(L, e0 + seg);
  int sum = 0;
  for (int64_t e = e0; e < e1; ++e)
    for (int w = 0; w < warps; ++w) sum += smem[w * L + e];
  int run = block_exclusive_scan(sum, warp_sum);
  for (int64_t e = e0; e < e1; ++e) {
    const int first = run;
    for (int w = 0; w < warps; ++w) {
      const int n = smem[w * L + e];
      smem[w * L + e] = run;
      run += n;
    }
    a.begin[e] = first;
    a.count[e] = run - first;
  }
  __syncthreads();
  warp_place<kPlaceGroup>(a, s0, s1, mine);
  ptx::grid_dependency_wait();  // as in permute_fused
}

// General path, kernel 1 (one CTA per chunk of chunk_slots slots): scratch[c * L + e] =
// slots of expert e in chunk c. Each thread loads kU slots' ids, then their map entries,
// before counting them. shared: int[num_local].
__global__ void __launch_bounds__(kCountThreads) permute_count(PermuteArgs a, int64_t chunks, int64_t chunk_slots) {
  extern __shared__ int hist[];
  constexpr int kU = 4;
  const int64_t L = a.num_local, N = a.T * a.k, c = blockIdx.x;
  for (int64_t e = threadIdx.x; e < L; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int64_t s1 = std::min<int64_t>(N, (c + 1) * chunk_slots);
  for (int64_t base = c * chunk_slots + threadIdx.x; base < s1; base += kU * int64_t(blockDim.x)) {
    int32_t id[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t s = base + u * int64_t(blockDim.x);
      id[u] = s < s1 ? a.topk_ids[s] : -1;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int le = local_of(id[u], a.expert_map, a.E, L, a.status, true);
      if (le >= 0) atomicAdd(&hist[le], 1);
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < L; e += blockDim.x) a.scratch[c * L + e] = hist[e];
}

// General path, kernel 2 (one CTA of 1024): totals per expert, their exclusive scan ->
// begin/count, and scratch[c * L + e] rewritten to the first position of expert e's slots
// of chunk c. A thread walks one expert's chunks, loading kU at a time (coalesced over the
// experts) before using them. H200, kimi-k2: 3.6 µs at T = 128. A warp per expert, one expert
// after another, took 13-23 µs (one load latency per expert), and with scratch laid out per
// expert, a thread per expert took 99 µs at 128 chunks (a cache line per load).
// shared: int[num_local] + int[32].
__global__ void __launch_bounds__(1024) permute_scan(PermuteArgs a, int64_t chunks) {
  extern __shared__ int smem[];
  constexpr int kU = 8;
  const int64_t L = a.num_local;
  int* start = smem;         // (L) total, then begin, per expert
  int* warp_sum = smem + L;  // (32)
  const int tid = threadIdx.x;
  for (int64_t e = tid; e < L; e += blockDim.x) {
    const int32_t* col = a.scratch + e;  // chunk c at col[c * L]
    int tot = 0;
    for (int64_t c0 = 0; c0 < chunks; c0 += kU) {
      int v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) v[u] = c0 + u < chunks ? col[(c0 + u) * L] : 0;
#pragma unroll
      for (int u = 0; u < kU; ++u) tot += v[u];
    }
    start[e] = tot;
  }
  __syncthreads();
  const int64_t seg = (L + blockDim.x - 1) / blockDim.x;
  const int64_t e0 = std::min<int64_t>(L, tid * seg), e1 = std::min<int64_t>(L, e0 + seg);
  int sum = 0;
  for (int64_t e = e0; e < e1; ++e) sum += start[e];
  int run = block_exclusive_scan(sum, warp_sum);
  for (int64_t e = e0; e < e1; ++e) {
    const int cnt = start[e];
    a.begin[e] = run;
    a.count[e] = cnt;
    start[e] = run;
    run += cnt;
  }
  __syncthreads();
  for (int64_t e = tid; e < L; e += blockDim.x) {
    int32_t* col = a.scratch + e;
    int next = start[e];
    for (int64_t c0 = 0; c0 < chunks; c0 += kU) {
      int v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) v[u] = c0 + u < chunks ? col[(c0 + u) * L] : 0;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (c0 + u < chunks) col[(c0 + u) * L] = next;
        next += v[u];
      }
    }
  }
}

// General path, kernel 3 (one CTA of permute_warps warps per chunk): each warp counts its
// warp_slots slots, the warps' counters become their first positions (chunk's first position
// from scratch, then the earlier warps' counts), and each warp places its slots. shared:
// int[warps][num_local].
__global__ void permute_place(PermuteArgs a, int64_t chunks, int64_t warp_slots) {
  extern __shared__ int smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t L = a.num_local, N = a.T * a.k, c = blockIdx.x;
  ptx::grid_dependency_trigger();  // as in permute_fused
  int* next = smem + warp * L;
  for (int64_t e = lane; e < L; e += 32) next[e] = 0;
  __syncwarp();
  const int64_t s0 = (c * warps + warp) * warp_slots, s1 = std::min<int64_t>(N, s0 + warp_slots);
  warp_count<kPlaceGroup>(a, s0, s1, next, false);
  __syncthreads();
  for (int64_t e = threadIdx.x; e < L; e += blockDim.x) {
    int run = a.scratch[c * L + e];
    for (int w = 0; w < warps; ++w) {
      const int n = smem[w * L + e];
      smem[w * L + e] = run;
      run += n;
    }
  }
  __syncthreads();
  warp_place<kPlaceGroup>(a, s0, s1, next);
}

__global__ void batched_rows_kernel(const int32_t* __restrict__ num_tokens, int64_t L, int64_t M,
                                    uint32_t* status, int32_t* begin, int32_t* count) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  ptx::grid_dependency_trigger();  // as in permute_fused
  if (e >= L) return;
  int32_t c = num_tokens[e];
  if (c > M) {
    atomicOr(status, kStatusCountOverM);
    c = int32_t(M);
  } else if (c < 0) {
    atomicOr(status, kStatusCountNegative);
    c = 0;
  }
  begin[e] = int32_t(e * M);
  count[e] = c;
}

// The bounds (permute_fused_slots / permute_block_slots): -1 until read.
std::atomic<int> g_fused_slots{-1}, g_block_slots{-1};

// A bound of the environment: a slot count, negative values read as 0.
int env_slots(const char* var, int64_t fallback) { return std::max(0, env_int(var, int(fallback))); }

}  // namespace

int64_t permute_fused_slots() {
  const int v =
      choice_once(g_fused_slots, [] { return env_slots("FP4MOE_PERMUTE_FUSED_SLOTS", kPermuteFusedDefault); });
  return std::min<int64_t>(v, kPermuteFusedSlots);
}

int64_t permute_block_slots() {
  return choice_once(g_block_slots, [] { return env_slots("FP4MOE_PERMUTE_BLOCK_SLOTS", kPermuteBlockSlots); });
}

void set_permute_bounds(int64_t fused_slots, int64_t block_slots) {
  g_fused_slots.store(int(fused_slots < 0 ? kPermuteFusedDefault : std::min<int64_t>(fused_slots, INT_MAX)),
                      std::memory_order_relaxed);
  g_block_slots.store(int(block_slots < 0 ? kPermuteBlockSlots : std::min<int64_t>(block_slots, INT_MAX)),
                      std::memory_order_relaxed);
}

PermutePath permute_path(int64_t slots, int64_t num_local) {
  if (slots <= permute_fused_slots()) return PermutePath::fused;
  if (slots <= permute_block_slots() && permute_block_warps(slots, num_local) > 0) return PermutePath::block;
  // the workspace holds no chunk scratch up to kPermuteFusedSlots slots
  return slots <= kPermuteFusedSlots ? PermutePath::fused : PermutePath::chunked;
}

bool permute(const PermuteArgs& a, cudaStream_t stream) {
  const int64_t N = a.T * a.k, L = a.num_local;
  if (N <= 0 || L <= 0) {
    FP4MOE_CUDA_CHECK(cudaMemsetAsync(a.status, 0, sizeof(uint32_t), stream));
    return false;
  }
  const size_t hist_bytes = size_t(L) * sizeof(int);
  if (L > kMaxLocal)
    detail::fail(ErrorKind::unsupported, "permute: num_local_experts: got " + std::to_string(L) +
                                             ", need <= " + std::to_string(kMaxLocal) +
                                             " (one int per expert in 48 KiB of shared memory)");
  if (N > INT_MAX)
    detail::fail(ErrorKind::unsupported, "permute: tokens * top_k: got " + std::to_string(N) + ", need <= " +
                                             std::to_string(INT_MAX) + " (int32 row positions)");
  const PermutePath path = permute_path(N, L);
  if (path == PermutePath::fused) {  // the one-kernel paths zero the status word themselves
    launch_kernel(permute_fused, dim3(1), dim3(32), hist_bytes, a.dependent, stream, a);
    return true;
  }
  if (path == PermutePath::block) {
    const int64_t warps = permute_block_warps(N, L);
    launch_kernel(permute_block, dim3(1), dim3(unsigned(32 * warps)), size_t(warps * L + 32) * sizeof(int),
                  a.dependent, stream, a, permute_block_warp_slots(N, warps));
    return true;
  }
  FP4MOE_CUDA_CHECK(cudaMemsetAsync(a.status, 0, sizeof(uint32_t), stream));
  const int64_t chunks = permute_chunks(N, L), warps = permute_warps(L), warp_slots = permute_warp_slots(N, L);
  permute_count<<<unsigned(chunks), kCountThreads, hist_bytes, stream>>>(a, chunks, warps * warp_slots);
  FP4MOE_CUDA_CHECK_LAUNCH();
  permute_scan<<<1, 1024, hist_bytes + 32 * sizeof(int), stream>>>(a, chunks);
  FP4MOE_CUDA_CHECK_LAUNCH();
  permute_place<<<unsigned(chunks), unsigned(32 * warps), hist_bytes * size_t(warps), stream>>>(a, chunks, warp_slots);
  FP4MOE_CUDA_CHECK_LAUNCH();
  return true;
}

void batched_rows(const int32_t* expert_num_tokens, int64_t num_local, int64_t M, uint32_t* status,
                  int32_t* begin, int32_t* count, cudaStream_t stream) {
  if (num_local <= 0) return;
  const unsigned blocks = unsigned((num_local + 255) / 256);
  batched_rows_kernel<<<blocks, 256, 0, stream>>>(expert_num_tokens, num_local, M, status, begin, count);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, permute_fused);
}

}  // namespace fp4moe::cuda
