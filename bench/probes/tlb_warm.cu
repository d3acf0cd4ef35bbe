// Probe: does a weight stream pay for cold address translations (TLB misses) at its start?
//
// Question (v78): at T = 1 the decode kernels read DRAM at 54-67% of its peak, and v13 / v41's
// probes read the same bytes in the kernels' pattern at only 3.0-3.5 TB/s, a plain read too.
// The bench (like a model's layers) reads weights that neither L2 nor the TLBs have seen. If the
// translations are part of the cost, touching one word per page of the stream before it (a
// few dozen loads, e.g. from the permute while it waits) would take that part off the stream.
//
// One pool of POOL_GB GiB; each timing reads S MiB at a random 2 MiB-aligned offset in it, so
// neither its data nor (with a pool far past any TLB's reach) its translations are cached.
//   cold:      the read alone
//   warm STEP: a touch kernel first reads one 4-byte word every STEP bytes of the region (STEP
//              = 2 MiB or 64 KiB: the two page sizes the driver may use), then the read, timed
//              alone. The touch brings 32 bytes per STEP into L2: 0.002-0.05% of the region.
//   touch:     the touch kernel's own time (2 MiB step).
// The read: each CTA one contiguous chunk (the fast path's pattern since v74), 16-byte loads,
// 8 in flight per thread, 256 threads, 8 CTAs per SM. Median of TRIALS, variants interleaved.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o tlb_warm bench/probes/tlb_warm.cu
// Run:   ./tlb_warm [POOL_GB=48] [TRIALS=41]   (one line per size and variant: median us, TB/s)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "probe_check.cuh"

// CTA c reads 16-byte words [c * per_cta, (c + 1) * per_cta) of buf (n16 in all).
__global__ void __launch_bounds__(256) chunk_read(const uint4* __restrict__ buf, int64_t n16, int64_t per_cta,
                                                  uint32_t* sink) {
  const int64_t b = int64_t(blockIdx.x) * per_cta, e = n16 < b + per_cta ? n16 : b + per_cta;
  uint32_t acc = 0;
  for (int64_t i = b + threadIdx.x; i < e; i += 8 * int64_t(blockDim.x)) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t j = i + u * int64_t(blockDim.x);
      v[u] = j < e ? ld_stream(buf + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9E3779B9u) sink[0] = acc;  // keeps the loads; practically never taken
}

// One 4-byte load every `step` bytes of [base, base + bytes).
__global__ void touch(const uint8_t* __restrict__ base, int64_t bytes, int64_t step, uint32_t* sink) {
  const int64_t off = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * step;
  if (off >= bytes) return;
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(base + off));
  if (v == 0x9E3779B9u) sink[1] = v;
}

int main(int argc, char** argv) {
  const int64_t pool_gb = argc > 1 ? std::atoll(argv[1]) : 48;
  const int trials = argc > 2 ? std::atoi(argv[2]) : 41;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  const int64_t pool = std::min<int64_t>(pool_gb << 30, int64_t(free_b) - (int64_t(4) << 30));
  uint8_t* base = nullptr;
  CK(cudaMalloc(&base, size_t(pool)));
  uint32_t* sink = nullptr;
  CK(cudaMalloc(&sink, 64));
  const int ctas = prop.multiProcessorCount * 8;
  std::printf("%s, %d SMs; pool %.1f GiB; %d trials\n", prop.name, prop.multiProcessorCount, double(pool) / (1 << 30),
              trials);
  std::printf("columns: MiB read, variant, median us of the read (touch: of the touch), TB/s\n");

  std::mt19937_64 rng(78);
  constexpr int64_t kAlign = int64_t(2) << 20;
  Timer t;
  for (const int64_t mib : {19, 62, 117, 512}) {
    const int64_t bytes = mib << 20, n16 = bytes / 16, per_cta = (n16 + ctas - 1) / ctas;
    const int64_t slots = (pool - bytes) / kAlign;
    auto region = [&] { return base + int64_t(rng() % uint64_t(slots)) * kAlign; };
    auto read = [&](const uint8_t* r) {
      CK(cudaEventRecord(t.a));
      chunk_read<<<ctas, 256>>>(reinterpret_cast<const uint4*>(r), n16, per_cta, sink);
      CK(cudaGetLastError());
      CK(cudaEventRecord(t.b));
      return t.us();
    };
    auto warm = [&](const uint8_t* r, int64_t step) {
      const int64_t n = (bytes + step - 1) / step;
      touch<<<int((n + 127) / 128), 128>>>(r, bytes, step, sink);
      CK(cudaGetLastError());
    };
    std::vector<float> cold, warm2m, warm64k, touch_us;
    for (int i = 0; i < trials + 2; ++i) {  // the first two rounds warm the clocks up, not kept
      const bool keep = i >= 2;
      const float c = read(region());
      const uint8_t* r = region();
      CK(cudaEventRecord(t.a));
      warm(r, kAlign);
      CK(cudaEventRecord(t.b));
      const float tu = t.us();
      const float w2 = read(r);
      r = region();
      warm(r, int64_t(64) << 10);
      CK(cudaDeviceSynchronize());
      const float w64 = read(r);
      if (keep) {
        cold.push_back(c);
        warm2m.push_back(w2);
        warm64k.push_back(w64);
        touch_us.push_back(tu);
      }
    }
    auto line = [&](const char* name, float us, bool rate) {
      if (rate) std::printf("%5lld  %-10s %9.2f  %5.2f\n", (long long)mib, name, us, double(bytes) / us / 1e6);
      else std::printf("%5lld  %-10s %9.2f\n", (long long)mib, name, us);
    };
    line("cold", median(cold), true);
    line("warm 2M", median(warm2m), true);
    line("warm 64K", median(warm64k), true);
    line("touch", median(touch_us), false);
  }
  CK(cudaFree(base));
  CK(cudaFree(sink));
  return 0;
}
