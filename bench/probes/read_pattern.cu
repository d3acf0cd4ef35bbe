// Probe: how fast can the H200 read weights laid out as the kernels lay them out, with the
// access pattern of the decode kernel (gemm_decode.cu), against a plain streaming read?
//
// Question (notes v12, "T = 1"): the decode kernels read their weights at 2.3-2.7 TB/s where a
// copy reaches 3.9-4.3; more bytes in flight (a shared-memory ring, L2 prefetch) made them no
// faster. Is the access pattern (thousands of warps, each walking its own short K slice of two
// row tiles 57 KB apart) what caps the rate, independent of the decode's arithmetic?
//
// The buffer models kimi-k2's GEMM 1 at T = 1: R row tiles of 16 rows (8 experts x 4096 rows /
// 16), KB k-blocks of 512 bytes each (K = 7168 / 64), ~117 MB. A warp owns (row pair, K
// slice): it reads the two row tiles' k-blocks of its slice, D k-blocks per stream per batch
// (lane: one 16-byte load per k-block per stream), and folds them into a checksum.
//   layout r: address = (r * KB + kb) * 512       (the fragment layout: a row tile's K contiguous)
//   layout k: address = (kb * R + r) * 512        (k-block major: same kb of all row tiles adjacent)
// Occupancy is capped with dynamic shared memory. Each timing reads one of several copies of
// the buffer in turn so that nothing is served from L2; median of the runs.
//
// Bulk mode (v41): the same slices through per-warp rings of cp.async.bulk copies (bulk_slices).
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o read_pattern bench/probes/read_pattern.cu
// Run:   ./read_pattern            (prints one line per configuration, TB/s of bytes read)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.cuh"

constexpr int kBlockBytes = 512;

// Plain streaming read: grid-stride, 8 independent 16-byte loads per thread in flight.
__global__ void seq_read(const uint4* __restrict__ buf, int64_t n16, uint32_t* sink) {
  uint32_t acc = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = ld_stream(buf + i + u * stride);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    uint4 v = ld_stream(buf + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;  // never true for the data below; keeps the loads
}

// The decode pattern: warp g (global) owns row pair g / splits, slice g % splits.
template <int D, bool KMajor>
__global__ void warp_slices(const uint4* __restrict__ buf, int R, int KB, int splits, int kps, uint32_t* sink) {
  extern __shared__ uint8_t pad[];  // occupancy cap only
  const int lane = threadIdx.x & 31;
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t units = int64_t(R / 2) * splits;
  if (g >= units) return;
  const int pair = int(g / splits), slice = int(g % splits);
  const int kb0 = slice * kps, kb1 = min(KB, kb0 + kps);
  constexpr int kLanes16 = kBlockBytes / 16;  // 32: one 16-byte load per lane per k-block
  uint32_t acc = 0;
  for (int kb = kb0; kb < kb1; kb += D) {
    uint4 v[2][D];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int r = 2 * pair + s;
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int k = min(kb + d, kb1 - 1);
        const int64_t blk = KMajor ? int64_t(k) * R + r : int64_t(r) * KB + k;
        v[s][d] = ld_stream(buf + blk * kLanes16 + lane);
      }
    }
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int d = 0; d < D; ++d) acc ^= v[s][d].x ^ v[s][d].y ^ v[s][d].z ^ v[s][d].w;
  }
  if (acc == 0x9e3779b9u) sink[lane] = acc + pad[0];
}

// The decode pattern through bulk copies: lane 0 of each warp copies D k-blocks of both row
// tiles of its slice at once (two cp.async.bulk of D * 512 contiguous bytes, one mbarrier) into
// the warp's ring of S stages in shared memory, S stages ahead; the lanes read their 16 bytes of
// each k-block back (as the decode kernels' lanes read their registers) and fold them.
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{ .reg .pred p;\n"
      "W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra W;\n}" :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}
// One warp's shared memory: its S mbarriers (128 bytes), then S stages of both row tiles' D k-blocks.
__host__ __device__ constexpr int bulk_region_bytes(int d, int s) { return 128 + s * 2 * d * kBlockBytes; }
template <int D, int S>
__global__ void bulk_slices(const uint8_t* __restrict__ buf, int R, int KB, int splits, int kps, uint32_t* sink,
                            uint32_t* check) {
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kStage = 2 * D * kBlockBytes, kRegion = bulk_region_bytes(D, S);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t units = int64_t(R / 2) * splits;
  if (g >= units) return;
  const int pair = int(g / splits), slice = int(g % splits);
  const int kb0 = slice * kps, kb1 = min(KB, kb0 + kps);
  if (kb0 >= kb1) return;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + warp * kRegion);
  uint8_t* ring = smem + warp * kRegion + 128;
  const int stages = (kb1 - kb0 + D - 1) / D;
  auto issue = [&](int s, int kb) {  // lane 0
    const uint32_t n = uint32_t(min(D, kb1 - kb));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(&bars[s])),
                 "r"(2 * n * kBlockBytes) : "memory");
#pragma unroll
    for (int t = 0; t < 2; ++t)
      bulk_copy(ring + s * kStage + t * D * kBlockBytes, buf + (int64_t(2 * pair + t) * KB + kb) * kBlockBytes,
                n * kBlockBytes, &bars[s]);
  };
  if (lane == 0) {
    for (int s = 0; s < S; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&bars[s])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int i = 0; i < min(S, stages); ++i) issue(i, kb0 + i * D);
  }
  __syncwarp();
  uint32_t acc = 0;
  for (int i = 0; i < stages; ++i) {
    const int s = i % S;
    bar_wait(&bars[s], uint32_t(i / S) & 1u);
    const int n = min(D, kb1 - (kb0 + i * D));
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < n) {
          const uint4 v = *reinterpret_cast<const uint4*>(ring + s * kStage + (t * D + d) * kBlockBytes + lane * 16);
          acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    __syncwarp();
    if (lane == 0 && i + S < stages) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the lanes' reads before the copy's writes
      issue(s, kb0 + (i + S) * D);
    }
  }
  if (check) atomicXor(check, acc);
  else if (acc == 0x9e3779b9u) sink[lane] = acc;
}

int main(int argc, char** argv) {
  const int R = argc > 1 ? std::atoi(argv[1]) : 2048;  // row tiles (kimi-k2 GEMM 1, 8 experts)
  const int KB = argc > 2 ? std::atoi(argv[2]) : 112;  // k-blocks (K = 7168)
  const int copies = 8;
  const int64_t bytes = int64_t(R) * KB * kBlockBytes;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<uint4*> bufs(copies);
  for (auto& p : bufs) {
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0x5a, bytes));
  }
  uint32_t* sink;
  CK(cudaMalloc(&sink, 4096));
  Timer t;
  int turn = 0;
  auto time_it = [&](auto&& launch) {
    std::vector<float> us;
    for (int i = 0; i < 3 + 15; ++i) {
      const uint4* b = bufs[turn++ % copies];
      CK(cudaEventRecord(t.a));
      launch(b);
      CK(cudaGetLastError());
      CK(cudaEventRecord(t.b));
      const float u = t.us();
      if (i >= 3) us.push_back(u);
    }
    return median(us) * 1e-6;
  };
  std::printf("buffer %.1f MB (R %d row tiles x KB %d k-blocks x 512 B), %d SMs\n", bytes / 1e6, R, KB, sms);
  {
    const double s = time_it([&](const uint4* b) { seq_read<<<sms * 4, 512>>>(b, bytes / 16, sink); });
    std::printf("%-8s %-6s %6s %3s %5s %8.1f us %6.2f TB/s\n", "seq", "-", "-", "-", "-", s * 1e6, bytes / s / 1e12);
  }
  const int splits_list[] = {1, 2, 4, 7, 14};
  const int warps_list[] = {16, 24, 32, 48, 64};
  for (int km = 0; km < 2; ++km)
    for (int d : {2, 4, 8})
      for (int splits : splits_list)
        for (int wps : warps_list) {
          const int kps = (KB + splits - 1) / splits;
          const int threads = 256;  // 8 warps per CTA
          const int64_t units = int64_t(R / 2) * splits;
          const int grid = int((units * 32 + threads - 1) / threads);
          const int ctas_per_sm = std::max(1, wps / 8);
          const int smem = std::min(227 * 1024, (228 * 1024) / ctas_per_sm - 1024);
          auto run = [&](auto kern) {
            CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            return time_it([&](const uint4* b) { kern<<<grid, threads, smem>>>(b, R, KB, splits, kps, sink); });
          };
          double s = 0;
          if (km == 0) s = d == 2 ? run(warp_slices<2, false>) : d == 4 ? run(warp_slices<4, false>) : run(warp_slices<8, false>);
          else s = d == 2 ? run(warp_slices<2, true>) : d == 4 ? run(warp_slices<4, true>) : run(warp_slices<8, true>);
          std::printf("%-8s %-6s %6d %3d %5d %8.1f us %6.2f TB/s\n", km ? "kmajor" : "rmajor", "slices", splits, d, wps,
                      s * 1e6, bytes / s / 1e12);
        }
  // Bulk copies: 4-warp CTAs, occupancy set by each variant's rings. Each variant is first
  // checked: the XOR of every lane's fold over random data must be the buffer's XOR.
  std::vector<uint32_t> host(bytes / 4);
  uint32_t x = 12345u, want = 0;
  for (auto& v : host) {
    x = x * 1664525u + 1013904223u;
    v = x;
    want ^= x;
  }
  uint8_t* rnd;
  CK(cudaMalloc(&rnd, bytes));
  CK(cudaMemcpy(rnd, host.data(), bytes, cudaMemcpyHostToDevice));
  for (int splits : {2, 4, 7, 14}) {
    const int kps = (KB + splits - 1) / splits;
    auto run = [&](auto kern, int d, int st) {
      const int threads = 128;
      const int smem = threads / 32 * bulk_region_bytes(d, st);
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
      const int64_t units = int64_t(R / 2) * splits;
      const int grid = int((units * 32 + threads - 1) / threads);
      CK(cudaMemset(sink, 0, 4));
      kern<<<grid, threads, smem>>>(rnd, R, KB, splits, kps, sink + 1, sink);
      CK(cudaDeviceSynchronize());
      uint32_t got = 0;
      CK(cudaMemcpy(&got, sink, 4, cudaMemcpyDeviceToHost));
      if (got != want) std::printf("bulk D %d S %d splits %d: WRONG fold %08x, want %08x\n", d, st, splits, got, want);
      const double s = time_it([&](const uint4* b) {
        kern<<<grid, threads, smem>>>(reinterpret_cast<const uint8_t*>(b), R, KB, splits, kps, sink + 8, nullptr);
      });
      std::printf("%-8s %-6s %6d %3d %5d %8.1f us %6.2f TB/s  (ring %d x %d k-blocks)\n", "rmajor", "bulk", splits, d,
                  per_sm * threads / 32, s * 1e6, bytes / s / 1e12, st, d);
    };
    run(bulk_slices<1, 4>, 1, 4);
    run(bulk_slices<2, 2>, 2, 2);
    run(bulk_slices<2, 4>, 2, 4);
    run(bulk_slices<4, 2>, 4, 2);
    run(bulk_slices<4, 3>, 4, 3);
    run(bulk_slices<8, 2>, 8, 2);
    run(bulk_slices<16, 2>, 16, 2);
  }
  std::printf("columns: layout, pattern, K slices per row pair, k-blocks per batch (D), warps per SM cap, median us, TB/s read\n");
  return 0;
}
