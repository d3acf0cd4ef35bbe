// Probe: what does one cudaPointerGetAttributes call cost on the host?
//
// Question (notes v67 §2): every public entry checks each CUDA tensor's data pointer with one
// call (cuda::why_not_device_memory, validate.cpp), so that a host buffer labelled cuda fails
// naming its argument instead of faulting in a kernel; Layer::forward checks five tensors per
// call. The calls run on the host before the launches (under a CUDA graph's replay not at all).
// How many ns does one take, by memory kind, beside what the forward's launches cost?
//
// Rows: ns per call (median of kRounds rounds of kCalls calls) for a cudaMalloc pointer (at its
// start and 1 MiB inside), pinned host memory, managed memory, a malloc'd host buffer, and, to
// compare, one empty kernel launch and one cudaGetDevice. Then whether the query may run while a
// stream captures a graph, in each capture mode (torch.cuda.graph captures in the global mode):
// the query's result and the capture's end, with a kernel captured after the query.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o pointer_attrs bench/probes/pointer_attrs.cu
// Run:   ./pointer_attrs
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "probe_check.cuh"

constexpr int kCalls = 20000;
constexpr int kRounds = 7;

__global__ void empty_kernel() {}

double ns_per_call(const std::function<void()>& f) {
  std::vector<double> r;
  for (int round = 0; round < kRounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    r.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kCalls);
  }
  return median(r);
}

int main() {
  CK(cudaFree(nullptr));  // the context
  void *dev = nullptr, *pinned = nullptr, *managed = nullptr;
  CK(cudaMalloc(&dev, 64 << 20));
  CK(cudaMallocHost(&pinned, 1 << 20));
  CK(cudaMallocManaged(&managed, 1 << 20));
  std::vector<char> pageable(1 << 20);
  // a few more allocations, as a serving process holds many
  std::vector<void*> more(256);
  for (void*& m : more) CK(cudaMalloc(&m, 1 << 20));
  int type_seen[5] = {};
  auto attrs = [&](const void* p) {
    cudaPointerAttributes at{};
    CK(cudaPointerGetAttributes(&at, p));
    type_seen[int(at.type) & 3]++;
  };
  struct Row {
    const char* name;
    std::function<void()> f;
  };
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Row rows[] = {
      {"cudaMalloc pointer", [&] { attrs(dev); }},
      {"cudaMalloc pointer + 1 MiB", [&] { attrs(static_cast<char*>(dev) + (1 << 20)); }},
      {"pinned host", [&] { attrs(pinned); }},
      {"managed", [&] { attrs(managed); }},
      {"malloc host", [&] { attrs(pageable.data()); }},
      {"cudaGetDevice", [&] { int d; CK(cudaGetDevice(&d)); }},
      {"empty kernel launch", [&] { empty_kernel<<<1, 32, 0, s>>>(); }},
  };
  std::printf("%-28s %10s\n", "call", "ns/call");
  for (const Row& r : rows) {
    const double ns = ns_per_call(r.f);
    CK(cudaStreamSynchronize(s));
    std::printf("%-28s %10.1f\n", r.name, ns);
  }
  std::printf("types seen (unregistered, host, device, managed): %d %d %d %d\n", type_seen[0], type_seen[1],
              type_seen[2], type_seen[3]);
  int pageable_access = 0;
  CK(cudaDeviceGetAttribute(&pageable_access, cudaDevAttrPageableMemoryAccess, 0));
  std::printf("cudaDevAttrPageableMemoryAccess: %d\n", pageable_access);
  const struct {
    const char* name;
    cudaStreamCaptureMode mode;
  } modes[] = {{"global", cudaStreamCaptureModeGlobal},
               {"thread_local", cudaStreamCaptureModeThreadLocal},
               {"relaxed", cudaStreamCaptureModeRelaxed}};
  for (const auto& m : modes) {
    CK(cudaStreamBeginCapture(s, m.mode));
    cudaPointerAttributes at{};
    const cudaError_t q = cudaPointerGetAttributes(&at, dev);
    const cudaError_t h = cudaPointerGetAttributes(&at, pageable.data());
    empty_kernel<<<1, 32, 0, s>>>();
    const cudaError_t l = cudaGetLastError();
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(s, &g);
    std::printf("capture %-12s query device %s, host %s; launch %s; end capture %s\n", m.name, cudaGetErrorName(q),
                cudaGetErrorName(h), cudaGetErrorName(l), cudaGetErrorName(e));
    if (g) CK(cudaGraphDestroy(g));
    (void)cudaGetLastError();
  }
  for (void* m : more) CK(cudaFree(m));
  CK(cudaFree(dev));
  CK(cudaFreeHost(pinned));
  CK(cudaFree(managed));
  return 0;
}
