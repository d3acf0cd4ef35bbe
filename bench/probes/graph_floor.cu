// Probe: what does `fp4moe bench`'s timing read for graphs that do (almost) nothing?
//
// Question (notes v49): the bench times each CUDA graph replay between two events, replays
// queued back to back on one stream (tools/gpu.cpp time_cuda). Its "route us" column, a graph
// of one one-warp kernel, reads 10-16 µs at T = 1, and the T = 1 layer (a chain of four or five
// kernels, most of them programmatic dependents) reads 18.3 µs on qwen3-30b, whose weights need
// 5.4 µs at the copy rate. How much of that is the timing method's own floor: the graph's
// entry, each kernel's launch in the chain, the event pair?
//
// Configurations, each a graph captured from one stream and timed as the bench does (an event
// pair around every replay, median of kIters after kWarmup), and as a throughput (one event pair
// around kIters replays, mean per replay):
//   chain N        N empty kernels (1 block of 32 threads) in stream order, N = 1..6
//   pdl N          the same, kernels 2..N programmatic dependents (as the layer's chain: each
//                  kernel triggers its dependents at its start and waits for its predecessor)
//   wide N         N empty kernels of 132 blocks x 384 threads (one CTA per SM), PDL
//   spin X (+N)    one kernel that spins X µs on %globaltimer (1 block), alone and followed by
//                  N empty PDL kernels: does the floor add to real work or hide under it?
// Direct launches (no graph) of chain / pdl 4 for comparison.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o graph_floor bench/probes/graph_floor.cu
// Run:   ./graph_floor      (one line per configuration: µs median per replay, p10-p90, mean)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "probe_check.cuh"

constexpr int kWarmup = 20;
constexpr int kIters = 400;

__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// An empty kernel; with PDL it triggers its dependents first and waits for its predecessor
// (both immediate when launched normally). The store keeps it from being optimized away.
__global__ void empty_kernel(int* sink, int v) {
  pdl_trigger();
  pdl_wait();
  if (v < 0 && threadIdx.x == 0) *sink = v;
}

// Spins ns nanoseconds of %globaltimer in thread 0 of block 0.
__global__ void spin_kernel(int* sink, uint64_t ns) {
  pdl_trigger();
  pdl_wait();
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    const uint64_t t0 = globaltimer();
    while (globaltimer() - t0 < ns) {
    }
    *sink = 1;
  }
}

struct Launch {
  bool pdl = false;
  dim3 grid{1}, block{32};
};

void launch_empty(cudaStream_t s, const Launch& l, int* sink) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = l.grid;
  cfg.blockDim = l.block;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = l.pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, empty_kernel, sink, 1));
}

struct Stats {
  double median = 0, p10 = 0, p90 = 0, mean_throughput = 0;
};

// Times `body` (captured into a graph when `graph`) as the bench does, and as a throughput.
Stats time_body(cudaStream_t s, bool graph, const std::function<void(cudaStream_t)>& body) {
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g = nullptr;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    body(s);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
  }
  auto run = [&] {
    if (graph) CK(cudaGraphLaunch(exec, s));
    else body(s);
  };
  for (int i = 0; i < kWarmup; ++i) run();
  CK(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev(2 * kIters);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < kIters; ++i) {
    CK(cudaEventRecord(ev[2 * i], s));
    run();
    CK(cudaEventRecord(ev[2 * i + 1], s));
  }
  CK(cudaStreamSynchronize(s));
  std::vector<double> us(kIters);
  for (int i = 0; i < kIters; ++i) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us[i] = ms * 1e3;
  }
  // Throughput: one event pair around all replays.
  CK(cudaEventRecord(ev[0], s));
  for (int i = 0; i < kIters; ++i) run();
  CK(cudaEventRecord(ev[1], s));
  CK(cudaStreamSynchronize(s));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
  for (auto& e : ev) CK(cudaEventDestroy(e));
  if (exec) CK(cudaGraphExecDestroy(exec));
  std::sort(us.begin(), us.end());
  Stats st;
  st.median = us[kIters / 2];
  st.p10 = us[kIters / 10];
  st.p90 = us[kIters * 9 / 10];
  st.mean_throughput = ms * 1e3 / kIters;
  return st;
}

int main() {
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* sink = nullptr;
  CK(cudaMalloc(&sink, 4));
  const dim3 wide(unsigned(prop.multiProcessorCount));

  std::printf("%s, %d SMs; %d replays after %d, an event pair around each (the bench) and around all\n",
              prop.name, prop.multiProcessorCount, kIters, kWarmup);
  std::printf("%-28s %10s %16s %14s\n", "configuration", "median us", "p10-p90 us", "throughput us");
  auto row = [&](const std::string& name, bool graph, const std::function<void(cudaStream_t)>& body) {
    const Stats st = time_body(s, graph, body);
    std::printf("%-28s %10.2f %7.2f-%-8.2f %14.2f\n", name.c_str(), st.median, st.p10, st.p90, st.mean_throughput);
  };
  for (int n = 1; n <= 6; ++n)
    row("graph chain " + std::to_string(n), true, [&](cudaStream_t st) {
      for (int i = 0; i < n; ++i) launch_empty(st, Launch{false}, sink);
    });
  for (int n = 2; n <= 6; ++n)
    row("graph pdl " + std::to_string(n), true, [&](cudaStream_t st) {
      launch_empty(st, Launch{false}, sink);
      for (int i = 1; i < n; ++i) launch_empty(st, Launch{true}, sink);
    });
  for (int n : {1, 4})
    row("graph wide pdl " + std::to_string(n), true, [&](cudaStream_t st) {
      launch_empty(st, Launch{false, wide, dim3(384)}, sink);
      for (int i = 1; i < n; ++i) launch_empty(st, Launch{true, wide, dim3(384)}, sink);
    });
  for (int x : {5, 10}) {
    for (int n : {0, 3}) {
      row("graph spin " + std::to_string(x) + " us + " + std::to_string(n) + " pdl", true, [&](cudaStream_t st) {
        spin_kernel<<<1, 32, 0, st>>>(sink, uint64_t(x) * 1000);
        CK(cudaGetLastError());
        for (int i = 0; i < n; ++i) launch_empty(st, Launch{true}, sink);
      });
    }
  }
  row("direct chain 4", false, [&](cudaStream_t st) {
    for (int i = 0; i < 4; ++i) launch_empty(st, Launch{false}, sink);
  });
  row("direct pdl 4", false, [&](cudaStream_t st) {
    launch_empty(st, Launch{false}, sink);
    for (int i = 1; i < 4; ++i) launch_empty(st, Launch{true}, sink);
  });
  CK(cudaFree(sink));
  CK(cudaStreamDestroy(s));
  return 0;
}
