#include "gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#if defined(FP4MOE_WITH_CUDA)
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#endif

namespace fp4moe::cli {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw Error(ErrorKind::unsupported, std::string(what) + ": this build of fp4moe has no CUDA");
}

#if defined(FP4MOE_WITH_CUDA)
void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw Error(ErrorKind::device, std::string(call) + " failed: " + cudaGetErrorString(e));
}
#define CLI_CUDA(call) check((call), #call)
#endif

}  // namespace

Buffer::Buffer(DeviceType device, int device_id, size_t bytes)
    : device_(device), device_id_(device_id), bytes_(bytes) {
  if (bytes == 0) return;
  if (device == DeviceType::cpu) {
    ptr_ = ::operator new(bytes);
    return;
  }
#if defined(FP4MOE_WITH_CUDA)
  CLI_CUDA(cudaSetDevice(device_id));
  CLI_CUDA(cudaMalloc(&ptr_, bytes));
#else
  no_cuda("Buffer");
#endif
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    device_id_ = o.device_id_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!ptr_) return;
  if (device_ == DeviceType::cpu) ::operator delete(ptr_);
#if defined(FP4MOE_WITH_CUDA)
  else cudaFree(ptr_);  // a failure here has nowhere to go; the process is ending or moving on
#endif
  ptr_ = nullptr;
}

void Buffer::upload(const void* src, size_t bytes) {
  if (bytes > bytes_) throw Error(ErrorKind::invalid_argument, "Buffer::upload: more bytes than allocated");
  if (bytes == 0) return;
  if (device_ == DeviceType::cpu) {
    std::memcpy(ptr_, src, bytes);
    return;
  }
#if defined(FP4MOE_WITH_CUDA)
  CLI_CUDA(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
#endif
}

void Buffer::download(void* dst, size_t bytes) const {
  if (bytes > bytes_) throw Error(ErrorKind::invalid_argument, "Buffer::download: more bytes than allocated");
  if (bytes == 0) return;
  if (device_ == DeviceType::cpu) {
    std::memcpy(dst, ptr_, bytes);
    return;
  }
#if defined(FP4MOE_WITH_CUDA)
  CLI_CUDA(cudaDeviceSynchronize());
  CLI_CUDA(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
#endif
}

void Buffer::fill(uint8_t byte) {
  if (bytes_ == 0) return;
  if (device_ == DeviceType::cpu) {
    std::memset(ptr_, byte, bytes_);
    return;
  }
#if defined(FP4MOE_WITH_CUDA)
  CLI_CUDA(cudaMemset(ptr_, byte, bytes_));
  CLI_CUDA(cudaDeviceSynchronize());
#endif
}

TensorView Buffer::view(DType dtype, std::initializer_list<int64_t> shape) const {
  return TensorView::of(ptr_, dtype, shape, device_, device_id_);
}

bool cuda_mem_info(int device, size_t* free_bytes, size_t* total_bytes) {
#if defined(FP4MOE_WITH_CUDA)
  if (cudaSetDevice(device) != cudaSuccess) return (void)cudaGetLastError(), false;
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) return (void)cudaGetLastError(), false;
  return true;
#else
  return false;
#endif
}

std::string cuda_device_name(int device) {
#if defined(FP4MOE_WITH_CUDA)
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return (void)cudaGetLastError(), "unknown";
  return p.name;
#else
  return "none";
#endif
}

#if defined(FP4MOE_WITH_CUDA)
namespace {

// The few NVML entries the bench reads, declared here so that neither nvml.h nor
// libnvidia-ml is needed to build or run (values from nvml.h: NVML_CLOCK_SM = 1,
// NVML_CLOCK_MEM = 2, NVML_SUCCESS = 0). Loaded and initialised once per process, never shut
// down (the clock sampler reads it during every timed run; unloading NVML mid-process is not
// worth the risk).
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2;

struct Nvml {
  using ByPci = int (*)(const char*, NvmlDevice*);
  using Clock = int (*)(NvmlDevice, int, unsigned*);
  using Power = int (*)(NvmlDevice, unsigned*);
  using Driver = int (*)(char*, unsigned);
  bool ok = false;
  std::string why;  // why not ok
  ByPci by_pci = nullptr;
  Clock clock = nullptr;
  Power power = nullptr;  // nvmlDeviceGetPowerUsage, mW; may be missing
  Driver driver = nullptr;

  static const Nvml& get() {
    static const Nvml n = [] {
      Nvml m;
      void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        m.why = "libnvidia-ml.so.1 not found: current clocks unknown";
        return m;
      }
      using Init = int (*)();
      auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
      m.by_pci = reinterpret_cast<ByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
      m.clock = reinterpret_cast<Clock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
      m.power = reinterpret_cast<Power>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
      m.driver = reinterpret_cast<Driver>(dlsym(lib, "nvmlSystemGetDriverVersion"));
      if (!init || !m.by_pci || !m.clock || init() != 0) {
        m.why = "NVML present but could not be initialised: current clocks unknown";
        return m;
      }
      m.ok = true;
      return m;
    }();
    return n;
  }
};

// NVML's handle of CUDA device `device` (found by its PCI bus id), or nullptr with why not.
NvmlDevice nvml_device(const Nvml& n, int device, std::string* why) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    (void)cudaGetLastError();
    *why = "no PCI bus id: current clocks unknown";
    return nullptr;
  }
  NvmlDevice d = nullptr;
  if (n.by_pci(bus, &d) != 0 || d == nullptr) {
    *why = std::string("NVML does not know PCI bus ") + bus;
    return nullptr;
  }
  return d;
}

void read_nvml(int device, GpuInfo* g) {
  const Nvml& n = Nvml::get();
  if (!n.ok) {
    g->nvml_note = n.why;
    return;
  }
  unsigned mhz = 0;
  if (NvmlDevice d = nvml_device(n, device, &g->nvml_note)) {
    if (n.clock(d, kNvmlClockSm, &mhz) == 0) g->sm_clock_now_mhz = int(mhz);
    if (n.clock(d, kNvmlClockMem, &mhz) == 0) g->mem_clock_now_mhz = int(mhz);
  }
  char ver[96] = {};
  if (n.driver && n.driver(ver, sizeof ver) == 0) g->driver = ver;
}

}  // namespace
#endif

GpuInfo cuda_gpu_info(int device) {
  GpuInfo g;
#if defined(FP4MOE_WITH_CUDA)
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return g;
  }
  g.present = true;
  g.name = p.name;
  g.sm_count = p.multiProcessorCount;
  g.cc_major = p.major;
  g.cc_minor = p.minor;
  g.l2_bytes = size_t(p.l2CacheSize);
  g.memory_bytes = p.totalGlobalMem;
  // CUDA 13 dropped clockRate / memoryClockRate from cudaDeviceProp; the attributes remain.
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess) g.sm_clock_max_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess) g.mem_clock_max_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&g.mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) g.mem_bus_bits = 0;
  (void)cudaGetLastError();
  int drv = 0;
  if (cudaDriverGetVersion(&drv) == cudaSuccess) g.driver = "CUDA driver API " + std::to_string(drv);
  read_nvml(device, &g);
#endif
  return g;
}

ClockSampler::Read nvml_clock_reader(int device) {
#if defined(FP4MOE_WITH_CUDA)
  const Nvml& n = Nvml::get();
  if (!n.ok) return {};
  std::string why;
  NvmlDevice d = nvml_device(n, device, &why);
  if (!d) return {};
  return [&n, d](ClockReading* r) {
    unsigned v = 0;
    if (n.clock(d, kNvmlClockSm, &v) != 0) return false;
    r->sm_mhz = v;
    r->has_power = n.power && n.power(d, &v) == 0;
    r->power_mw = r->has_power ? v : 0;
    return true;
  };
#else
  (void)device;
  return {};
#endif
}

std::string short_kernel_name(const std::string& demangled) {
  std::string s = demangled;
  // Anonymous-namespace qualifiers hold parentheses and say nothing here.
  for (const std::string noise : {"(anonymous namespace)::", "{anonymous}::"})
    for (size_t at; (at = s.find(noise)) != std::string::npos;) s.erase(at, noise.size());
  // Cut at the parameter list: the first '(' outside template arguments.
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>') --depth;
    else if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  // Drop the scopes and a template's return type: after the last top-level "::" or space.
  depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>') --depth;
    else if (depth == 0 && s[i] == ' ') start = i + 1;
    else if (depth == 0 && s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') start = i + 2;
  }
  return s.substr(start);
}

#if defined(FP4MOE_WITH_CUDA)
namespace {

// A node's name for GraphNodeTimes.
std::string node_name(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) return "node";
  switch (type) {
    case cudaGraphNodeTypeKernel: {
      cudaKernelNodeParams kp{};
      const char* mangled = nullptr;
      if (cudaGraphKernelNodeGetParams(node, &kp) != cudaSuccess || cudaFuncGetName(&mangled, kp.func) != cudaSuccess ||
          !mangled)
        return "kernel";
      int status = 0;
      char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
      const std::string full = status == 0 && d ? d : mangled;
      std::free(d);
      return short_kernel_name(full);
    }
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeWaitEvent: return "event wait";
    default: return "node type " + std::to_string(int(type));
  }
}

// Puts an event record node before the first node of `graph`'s chain, and after every node
// (ev[0] ... ev[n], n nodes); returns the chain's node names, or empty with *why.
std::vector<std::string> instrument_chain(cudaGraph_t graph, std::vector<cudaEvent_t>* ev, std::string* why) {
  size_t n = 0, m = 0;
  CLI_CUDA(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CLI_CUDA(cudaGraphGetNodes(graph, nodes.data(), &n));
  CLI_CUDA(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &m));
  std::vector<cudaGraphNode_t> from(m), to(m);
  std::vector<cudaGraphEdgeData> data(m);
  CLI_CUDA(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &m));
  if (n == 0 || m + 1 != n) {
    *why = "the graph is not one chain (" + std::to_string(n) + " nodes, " + std::to_string(m) + " edges)";
    return {};
  }
  std::map<cudaGraphNode_t, size_t> next;  // node -> its out-edge
  std::map<cudaGraphNode_t, int> in;
  for (size_t i = 0; i < m; ++i) {
    if (next.count(from[i]) || in[to[i]]++ > 0) {
      *why = "the graph is not one chain (a node with two edges)";
      return {};
    }
    next[from[i]] = i;
  }
  cudaGraphNode_t head = nullptr;
  for (cudaGraphNode_t x : nodes)
    if (!in.count(x)) head = x;
  std::vector<cudaGraphNode_t> chain{head};
  while (chain.size() < n && next.count(chain.back())) chain.push_back(to[next[chain.back()]]);
  if (!head || chain.size() != n) {
    *why = "the graph is not one chain";
    return {};
  }
  ev->assign(n + 1, nullptr);
  for (auto& e : *ev) CLI_CUDA(cudaEventCreate(&e));
  std::vector<std::string> names;
  cudaGraphNode_t rec = nullptr;
  CLI_CUDA(cudaGraphAddEventRecordNode(&rec, graph, nullptr, 0, (*ev)[0]));
  CLI_CUDA(cudaGraphAddDependencies(graph, &rec, &chain[0], nullptr, 1));
  for (size_t i = 0; i < n; ++i) {
    names.push_back(node_name(chain[i]));
    if (i + 1 < n) {
      const size_t e = next[chain[i]];
      CLI_CUDA(cudaGraphRemoveDependencies(graph, &from[e], &to[e], &data[e], 1));
    }
    CLI_CUDA(cudaGraphAddEventRecordNode(&rec, graph, &chain[i], 1, (*ev)[i + 1]));
    if (i + 1 < n) CLI_CUDA(cudaGraphAddDependencies(graph, &rec, &chain[i + 1], nullptr, 1));
  }
  return names;
}

}  // namespace
#endif

std::vector<double> time_cuda(int device, int variants, const std::function<void(int, void*)>& launch,
                              int warmup, int iters, std::string* note, GraphNodeTimes* nodes, int per_graph,
                              double warmup_ms, bool capture, ClockStats* clocks) {
#if defined(FP4MOE_WITH_CUDA)
  if (per_graph < 1) throw std::invalid_argument("time_cuda: per_graph: got " + std::to_string(per_graph) + ", need >= 1");
  if (nodes && per_graph != 1) throw std::invalid_argument("time_cuda: nodes are timed with per_graph 1 only");
  // Graph v's launches: variants v * per_graph + j, j < per_graph.
  auto launch_all = [&](int v, cudaStream_t s) {
    for (int j = 0; j < per_graph; ++j) launch(int((int64_t(v) * per_graph + j) % variants), s);
  };
  CLI_CUDA(cudaSetDevice(device));
  cudaStream_t stream;
  CLI_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaGraphExec_t> execs(variants, nullptr), node_execs(variants, nullptr);
  std::vector<std::vector<cudaEvent_t>> node_ev(variants);
  if (nodes) *nodes = GraphNodeTimes{.rest_us = nodes->rest_us};
  // Capture one graph per variant; any failure falls back to direct launches.
  bool graphs = capture;
  for (int v = 0; v < variants && graphs; ++v) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      graphs = false;
      break;
    }
    std::string why;
    try {
      launch_all(v, stream);
    } catch (const std::exception& e) {
      why = e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (!why.empty() || end != cudaSuccess || !graph) {
      graphs = false;
      if (note) *note = "CUDA graph capture failed (" + (why.empty() ? std::string(cudaGetErrorString(end)) : why) +
                        "); timed direct launches";
    } else if (cudaGraphInstantiate(&execs[v], graph, 0) != cudaSuccess) {
      graphs = false;
      if (note) *note = "cudaGraphInstantiate failed; timed direct launches";
    } else if (nodes && nodes->note.empty()) {
      // The copy whose nodes are timed in place, after the timed runs.
      cudaGraph_t copy = nullptr;
      CLI_CUDA(cudaGraphClone(&copy, graph));
      std::string why;
      std::vector<cudaEvent_t> ev;
      const std::vector<std::string> names = instrument_chain(copy, &ev, &why);
      if (names.empty() || (v > 0 && names != nodes->names)) {
        nodes->note = names.empty() ? why : "the variants' graphs differ";
      } else {
        nodes->names = names;
        node_ev[size_t(v)] = ev;
        CLI_CUDA(cudaGraphInstantiate(&node_execs[size_t(v)], copy, 0));
      }
      cudaGraphDestroy(copy);
    }
    if (graph) cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // clear a capture error so the direct path starts clean
  auto run = [&](int v) {
    if (graphs) CLI_CUDA(cudaGraphLaunch(execs[v], stream));
    else launch_all(v, stream);
  };
  for (int i = 0; i < warmup; ++i) run(i % variants);
  CLI_CUDA(cudaStreamSynchronize(stream));
  if (warmup_ms > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < warmup_ms) {
      for (int v = 0; v < variants; ++v) run(v);
      CLI_CUDA(cudaStreamSynchronize(stream));
    }
  }
  std::vector<cudaEvent_t> ev(2 * size_t(iters));
  for (auto& e : ev) CLI_CUDA(cudaEventCreate(&e));
  {
    // The clock while the timed replays run: sampled every 2 ms (NVML's reading takes ~tens of µs
    // on the host, off the GPU's path).
    ClockSampler sampler(clocks ? nvml_clock_reader(device) : ClockSampler::Read{}, std::chrono::milliseconds(2));
    for (int i = 0; i < iters; ++i) {
      CLI_CUDA(cudaEventRecord(ev[2 * i], stream));
      run(i % variants);
      CLI_CUDA(cudaEventRecord(ev[2 * i + 1], stream));
    }
    CLI_CUDA(cudaStreamSynchronize(stream));
    if (clocks) *clocks = sampler.stop();
  }
  std::vector<double> us(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    CLI_CUDA(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us[i] = double(ms) * 1e3 / per_graph;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  if (nodes && !graphs && nodes->note.empty()) nodes->note = "no CUDA graph";
  if (nodes && nodes->note.empty()) {
    // One replay at a time: the events of a graph are read before it runs again.
    const size_t n = nodes->names.size();
    std::vector<std::vector<double>> per(n);
    std::vector<double> total;
    for (int i = 0; i < iters; ++i) {
      const int v = i % variants;
      if (nodes->rest_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(nodes->rest_us));
      CLI_CUDA(cudaGraphLaunch(node_execs[size_t(v)], stream));
      CLI_CUDA(cudaStreamSynchronize(stream));
      const std::vector<cudaEvent_t>& e = node_ev[size_t(v)];
      for (size_t j = 0; j < n; ++j) {
        float ms = 0;
        CLI_CUDA(cudaEventElapsedTime(&ms, e[j], e[j + 1]));
        per[j].push_back(double(ms) * 1e3);
      }
      float ms = 0;
      CLI_CUDA(cudaEventElapsedTime(&ms, e[0], e[n]));
      total.push_back(double(ms) * 1e3);
    }
    for (size_t j = 0; j < n; ++j) nodes->us.push_back(median(per[j]));
    nodes->total_us = median(total);
  }
  for (auto& v : node_ev)
    for (auto& e : v) cudaEventDestroy(e);
  for (auto& x : node_execs)
    if (x) cudaGraphExecDestroy(x);
  for (auto& x : execs)
    if (x) cudaGraphExecDestroy(x);
  CLI_CUDA(cudaStreamDestroy(stream));
  return us;
#else
  no_cuda("time_cuda");
#endif
}

std::vector<double> time_cpu(int variants, const std::function<void(int)>& run, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) run(i % variants);
  std::vector<double> us(iters);
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run(i % variants);
    const auto t1 = std::chrono::steady_clock::now();
    us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  return us;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace fp4moe::cli
