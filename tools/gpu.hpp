// What the CLI needs from the CUDA runtime, behind a header that compiles without it:
// buffers on either device, memory queries, and timing by CUDA graph replay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "clock_sampler.hpp"
#include "fp4moe/fp4moe.hpp"

namespace fp4moe::cli {

// An owning byte buffer on the host or a CUDA device. Every CUDA call is checked and
// throws fp4moe::Error(device) naming it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(DeviceType device, int device_id, size_t bytes);
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  void upload(const void* src, size_t bytes);
  void download(void* dst, size_t bytes) const;
  void fill(uint8_t byte);
  TensorView view(DType dtype, std::initializer_list<int64_t> shape) const;

 private:
  void release();
  DeviceType device_ = DeviceType::cpu;
  int device_id_ = 0;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// cudaMemGetInfo on `device`; false when this build has no CUDA or the query fails.
bool cuda_mem_info(int device, size_t* free_bytes, size_t* total_bytes);
std::string cuda_device_name(int device);

// What a benchmark result needs to say about the GPU it ran on. Clocks in MHz; the
// current ones come from NVML (loaded at run time) and are 0 when it is absent.
struct GpuInfo {
  bool present = false;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t l2_bytes = 0;
  size_t memory_bytes = 0;
  int sm_clock_max_mhz = 0;        // cudaDevAttrClockRate
  int mem_clock_max_mhz = 0;       // cudaDevAttrMemoryClockRate
  int mem_bus_bits = 0;
  int sm_clock_now_mhz = 0;        // NVML, at the time of the query
  int mem_clock_now_mhz = 0;
  std::string driver;              // NVML driver version, or the CUDA driver API version
  std::string nvml_note;           // why current clocks are missing
};
GpuInfo cuda_gpu_info(int device);
// NVML's SM clock and board power of `device` for a ClockSampler; empty (nothing sampled) where
// this build has no CUDA, NVML is absent or does not know the device.
ClockSampler::Read nvml_clock_reader(int device);

// Each node of a captured graph timed in place (time_cuda's `nodes`): a copy of each
// variant's graph gets an event record node between every two nodes of its chain, and is
// replayed `iters` times after the timed runs, one replay at a time; per node, its name
// (the kernel's, shortened; "memset", "memcpy", ...) and the median µs from the event before
// it to the event after it. Empty, with `note` saying why, when the graph is not one chain or
// the variants' chains differ. With `rest_us`, each of those replays starts on an idle GPU.
struct GraphNodeTimes {
  int rest_us = 0;  // input: the host sleeps this long (the GPU idle) before each instrumented replay
  std::vector<std::string> names;
  std::vector<double> us;
  double total_us = 0;  // median of the instrumented replays, first event to last
  std::string note;
};

// Launches `launch(variant, stream)` round-robin over `variants`, `warmup` times then
// `iters` times, and returns each timed launch in µs. Each variant is captured into a
// CUDA graph once and replayed, timed with a pair of events; when capture fails (a
// backend that synchronises inside forward) the launches run directly and *note* says so.
// With `nodes`, the graphs' nodes are then timed in place as GraphNodeTimes says.
// per_graph > 1: each graph (and each timed sample) holds per_graph launches back to back,
// variants v * per_graph + j (mod variants), so the launches still come round-robin over the
// variants in order; each sample is the replay's time / per_graph: a launch's cost inside a
// larger graph, as a model's decode graph holds one layer call per layer, without the
// per-replay start and events that a graph of one call pays each time. Not with `nodes`.
// warmup_ms > 0: after the `warmup` replays, more untimed replays (whole rounds of the
// variants) until that many ms have passed, so that the timed replays run at the clocks a
// sustained load settles at (the power cap) rather than at those of a GPU that just woke.
// capture = false: direct launches on the stream, no graph. A cudaMemcpyAsync captured into a
// graph becomes a memcpy node that the copy engines run (2.7 TB/s on the H200, v51), where the
// same call on a stream runs as the driver's copy kernel (4.25 TB/s).
// clocks: the SM clock and board power over the timed replays (NVML every 2 ms, ClockSampler;
// samples 0 without NVML).
std::vector<double> time_cuda(int device, int variants, const std::function<void(int, void*)>& launch,
                              int warmup, int iters, std::string* note, GraphNodeTimes* nodes = nullptr,
                              int per_graph = 1, double warmup_ms = 0, bool capture = true,
                              ClockStats* clocks = nullptr);

// "ns::sm90_rsws_gemm<8, true, 4, false>(Params, WeightMaps)" -> "sm90_rsws_gemm<8, true, 4, false>":
// a demangled kernel name without its scopes and parameter list.
std::string short_kernel_name(const std::string& demangled);

// Same on the host with std::chrono.
std::vector<double> time_cpu(int variants, const std::function<void(int)>& run, int warmup, int iters);

double median(std::vector<double> v);

}  // namespace fp4moe::cli
