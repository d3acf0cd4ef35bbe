// Permutation of routed slots into per-expert row ranges (pipeline.hpp), deterministic
// whatever the scheduling: slots are cut into chunks of kPermuteChunk, one warp walks
// its chunk 32 slots at a time in slot order, and inside each step __match_any_sync
// groups lanes by expert so that a lane's rank among its peers is the popcount of the
// lower peer lanes. No atomics decide an order.
//
//   one chunk (T*k <= 1024, decode):  permute_fused          1 launch
//   otherwise:                        count -> scan -> place  3 launches
#include <algorithm>

#include "cuda/common/check.hpp"
#include "cuda/pipeline.hpp"

namespace fp4moe::cuda {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int64_t kMaxLocal = 12000;  // scan's int[L] + int[32] stay under 48 KiB

// The local expert of slot s, or -1. Ids outside [-1, E) are never used as an index.
__device__ __forceinline__ int local_expert(const int32_t* __restrict__ ids,
                                            const int32_t* __restrict__ map, int64_t E,
                                            int64_t num_local, int64_t s, uint32_t* status,
                                            bool report) {
  const int32_t id = ids[s];
  if (id == -1) return -1;
  if (id < -1 || id >= E) {
    if (report) atomicOr(status, kStatusBadId);
    return -1;
  }
  const int32_t l = map[id];
  return (l >= 0 && l < num_local) ? l : -1;  // prepare checked the map; stay in bounds anyway
}

__device__ __forceinline__ unsigned lanemask_lt() {
  return (1u << (threadIdx.x & 31)) - 1u;
}

// One warp: hist[e] += number of slots of expert e in [s0, s1). hist in shared memory.
__device__ void warp_count(const PermuteArgs& a, int64_t s0, int64_t s1, int* hist, bool report) {
  const int lane = threadIdx.x & 31;
  for (int64_t base = s0; base < s1; base += 32) {
    const int64_t s = base + lane;
    const int le = s < s1 ? local_expert(a.topk_ids, a.expert_map, a.E, a.num_local, s, a.status, report) : -1;
    const unsigned peers = __match_any_sync(kFull, le);
    if (le >= 0 && (lanemask_lt() & peers) == 0) hist[le] += __popc(peers);
    __syncwarp();
  }
}

// One warp: place the slots of [s0, s1) at next[e], next[e]+1, ... in slot order.
__device__ void warp_place(const PermuteArgs& a, int64_t s0, int64_t s1, int* next) {
  const int lane = threadIdx.x & 31;
  for (int64_t base = s0; base < s1; base += 32) {
    const int64_t s = base + lane;
    const int le = s < s1 ? local_expert(a.topk_ids, a.expert_map, a.E, a.num_local, s, a.status, false) : -1;
    const unsigned peers = __match_any_sync(kFull, le);
    const unsigned below = peers & lanemask_lt();
    int pos = -1;
    if (le >= 0) {
      pos = next[le] + __popc(below);
      a.row_token[pos] = int32_t(s / a.k);
    }
    if (s < s1) a.slot_row[s] = pos;
    __syncwarp();  // every lane has read next[le] before the leader moves it
    if (le >= 0 && below == 0) next[le] += __popc(peers);
    __syncwarp();
  }
}

// Exclusive scan of v over the 32 lanes of a warp.
__device__ __forceinline__ int warp_exclusive_scan(int v) {
  const int lane = threadIdx.x & 31;
  int x = v;
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(kFull, x, d);
    if (lane >= d) x += y;
  }
  return x - v;
}

// T*k <= kPermuteChunk: one warp counts, scans and places. shared: int[num_local].
__global__ void permute_fused(PermuteArgs a) {
  extern __shared__ int hist[];
  const int lane = threadIdx.x;
  const int64_t L = a.num_local, N = a.T * a.k;
  for (int64_t e = lane; e < L; e += 32) hist[e] = 0;
  __syncwarp();
  warp_count(a, 0, N, hist, true);
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
  warp_place(a, 0, N, hist);
}

// General path, kernel 1: scratch[c * L + e] = slots of expert e in chunk c.
// One warp per chunk; shared: int[warps][num_local].
__global__ void permute_count(PermuteArgs a, int64_t chunks) {
  extern __shared__ int smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t c = int64_t(blockIdx.x) * (blockDim.x / 32) + warp;
  if (c >= chunks) return;  // whole warps leave together; no block barrier below
  const int64_t L = a.num_local, N = a.T * a.k;
  int* hist = smem + warp * L;
  for (int64_t e = lane; e < L; e += 32) hist[e] = 0;
  __syncwarp();
  warp_count(a, c * kPermuteChunk, std::min<int64_t>(N, (c + 1) * kPermuteChunk), hist, true);
  for (int64_t e = lane; e < L; e += 32) a.scratch[c * L + e] = hist[e];
}

// General path, kernel 2 (one block of 1024): totals per expert, their exclusive scan
// -> begin/count, and scratch[c * L + e] rewritten to the first position of expert e's
// slots of chunk c. shared: int[num_local] + int[32].
__global__ void permute_scan(PermuteArgs a, int64_t chunks) {
  extern __shared__ int smem[];
  const int64_t L = a.num_local;
  int* start = smem;         // (L) total, then begin, per expert
  int* warp_sum = smem + L;  // (32)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
  for (int64_t e = tid; e < L; e += blockDim.x) {
    int tot = 0;
    for (int64_t c = 0; c < chunks; ++c) tot += a.scratch[c * L + e];
    start[e] = tot;
  }
  __syncthreads();
  const int64_t seg = (L + blockDim.x - 1) / blockDim.x;
  const int64_t e0 = std::min<int64_t>(L, tid * seg), e1 = std::min<int64_t>(L, e0 + seg);
  int sum = 0;
  for (int64_t e = e0; e < e1; ++e) sum += start[e];
  const int in_warp = warp_exclusive_scan(sum);
  if (lane == 31) warp_sum[warp] = in_warp + sum;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x / 32;
    const int v = lane < nw ? warp_sum[lane] : 0;
    const int ex = warp_exclusive_scan(v);
    if (lane < nw) warp_sum[lane] = ex;
  }
  __syncthreads();
  int run = warp_sum[warp] + in_warp;
  for (int64_t e = e0; e < e1; ++e) {
    const int cnt = start[e];
    a.begin[e] = run;
    a.count[e] = cnt;
    start[e] = run;
    run += cnt;
  }
  __syncthreads();
  for (int64_t e = tid; e < L; e += blockDim.x) {
    int pos = start[e];
    for (int64_t c = 0; c < chunks; ++c) {
      const int v = a.scratch[c * L + e];
      a.scratch[c * L + e] = pos;
      pos += v;
    }
  }
}

// General path, kernel 3: one warp per chunk places its slots from scratch's offsets.
__global__ void permute_place(PermuteArgs a, int64_t chunks) {
  extern __shared__ int smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t c = int64_t(blockIdx.x) * (blockDim.x / 32) + warp;
  if (c >= chunks) return;
  const int64_t L = a.num_local, N = a.T * a.k;
  int* next = smem + warp * L;
  for (int64_t e = lane; e < L; e += 32) next[e] = a.scratch[c * L + e];
  __syncwarp();
  warp_place(a, c * kPermuteChunk, std::min<int64_t>(N, (c + 1) * kPermuteChunk), next);
}

__global__ void batched_rows_kernel(const int32_t* __restrict__ num_tokens, int64_t L, int64_t M,
                                    uint32_t* status, int32_t* begin, int32_t* count) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
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

}  // namespace

void permute(const PermuteArgs& a, cudaStream_t stream) {
  const int64_t N = a.T * a.k, L = a.num_local;
  if (N <= 0 || L <= 0) return;
  const size_t hist_bytes = size_t(L) * sizeof(int);
  if (L > kMaxLocal)
    detail::fail(ErrorKind::unsupported, "permute: num_local_experts: got " + std::to_string(L) +
                                             ", need <= " + std::to_string(kMaxLocal) +
                                             " (one int per expert in 48 KiB of shared memory)");
  const int64_t chunks = permute_chunks(N);
  if (chunks == 1) {
    permute_fused<<<1, 32, hist_bytes, stream>>>(a);
    FP4MOE_CUDA_CHECK_LAUNCH();
    return;
  }
  // warps per block: as many as fit 32 KiB of histograms, at most 4
  const int wpb = int(std::clamp<int64_t>(int64_t(32 * 1024) / int64_t(hist_bytes), 1, 4));
  const unsigned blocks = unsigned((chunks + wpb - 1) / wpb);
  permute_count<<<blocks, 32 * wpb, hist_bytes * wpb, stream>>>(a, chunks);
  FP4MOE_CUDA_CHECK_LAUNCH();
  const size_t scan_bytes = hist_bytes + 32 * sizeof(int);
  permute_scan<<<1, 1024, scan_bytes, stream>>>(a, chunks);
  FP4MOE_CUDA_CHECK_LAUNCH();
  permute_place<<<blocks, 32 * wpb, hist_bytes * wpb, stream>>>(a, chunks);
  FP4MOE_CUDA_CHECK_LAUNCH();
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
