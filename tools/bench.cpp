// fp4moe bench: MoE layers of the presets on synthetic checkpoints, timed per token count
// against the ceilings and the bf16 baseline measured in the same process.
//
// Flow of one run (a preset and a quantization): pick the backend (the selection ladder),
// check host/device memory, draw the activation sets, calibrate W4A4 input scales, generate
// the packed weights, prepare (on a GPU: as many copies as keep the touched weights out of
// L2), build the bf16 baseline from the same experts, then per token count: route every
// set once, time forward, route and the baseline (CUDA graphs on a GPU, std::chrono on the
// host), and with the check compare sampled tokens against a reference-backend layer built
// from the same experts, regenerated from the seed. `--all` does every preset in turn.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "baseline.hpp"
#include "ceilings.hpp"
#include "cli.hpp"
#include "fp4moe_git_commit.h"  // generated: FP4MOE_GIT_COMMIT
#include "fp4moe/format.h"
#include "fp4moe/presets.hpp"
#include "gpu.hpp"
#include "json_text.hpp"
#include "synth.hpp"

namespace fp4moe::cli {
namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kCheckTokens = 8;          // sampled tokens per token count
constexpr int kCalibTokens = 2, kCalibExperts = 4;
constexpr float kSkewSlope = 1.5f;       // logit of the expert of rank r: -slope * ln(1 + r) + N(0, 1)
// Consecutive replays must not find the previous replays' weights in L2: the bytes a replay
// touches, times the number of weight copies rotated, must reach this many L2 sizes.
constexpr int kL2Multiple = 4;
constexpr int kMaxCopies = 64;
constexpr int kCeilingIters = 20;
constexpr double kDefaultWarmupMs = 2000;  // CUDA: untimed replays before the timed ones (--warmup-ms)
// Token counts of the full table (--all without --tokens) and the longest list that is
// still checked against the reference by default.
const std::vector<int64_t> kAllTokens{1, 8, 32, 128, 512, 2048, 8192, 16384};
constexpr size_t kCheckedListMax = 4;
// The bf16 baseline against fp4moe's own output: both compute the same layer, the baseline
// with bf16-rounded weights and intermediates (and no activation quantization under W4A4),
// so they differ by far less than these; a larger difference means a broken baseline.
constexpr double kBaselineAgreeW4A16 = 0.05, kBaselineAgreeW4A4 = 0.3;

// Stream ids for activations (experts use non-negative ids in stream_seed).
constexpr int64_t kActStream = -1;

size_t mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown CPU";
}

// The commit this binary was built from (cmake/git_commit.cmake: "-dirty" when tracked files
// had changes), else the checkout's where it runs.
std::string git_commit() {
  if (const std::string built = FP4MOE_GIT_COMMIT; built != "unknown") return built;
  FILE* p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
  if (!p) return "unknown";
  char buf[64] = {};
  const bool ok = std::fgets(buf, sizeof buf, p) != nullptr;
  pclose(p);
  std::string s = ok ? std::string(buf) : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s.empty() ? "unknown" : s;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

json desc_json(const LayerDesc& d) {
  return {{"hidden", d.hidden},
          {"intermediate", d.intermediate},
          {"num_experts", d.num_experts},
          {"top_k", d.top_k},
          {"weight_format", to_string(d.weight_format)},
          {"act_quant", to_string(d.act_quant)},
          {"activation", to_string(d.activation)},
          {"gate_up", to_string(d.gate_up)},
          {"routing",
           {{"method", to_string(d.routing.method)},
            {"renormalize", d.routing.renormalize},
            {"n_group", d.routing.n_group},
            {"topk_group", d.routing.topk_group},
            {"routed_scaling_factor", d.routing.routed_scaling_factor}}}};
}

json num_or_null(bool ok, double v) { return ok && std::isfinite(v) ? json(v) : json(nullptr); }
// Per-replay times (µs) rounded to 1 ns: a CUDA event's elapsed time is a float of milliseconds
// (~7 digits), whose conversion to double printed ~9 digits more than it holds.
json samples_us(const std::vector<double>& us) {
  json out = json::array();
  for (const double v : us) out.push_back(std::isfinite(v) ? json(std::round(v * 1e3) / 1e3) : json(nullptr));
  return out;
}

// One set of inputs at the largest token count; smaller counts use its first rows.
struct ActSet {
  std::vector<uint16_t> hidden;  // (Tmax, H) bf16 ~ N(0, 1)
  std::vector<float> logits;     // (Tmax, E) f32
};

// Whether token t's hidden states are zero under --zero-tokens `fraction`: the tokens where
// floor((t + 1) f) passes an integer, evenly spread (f = 0.5: t = 1, 3, 5, ...; f = 1: all).
bool zero_token(int64_t t, double fraction) {
  return std::floor(double(t + 1) * fraction) > std::floor(double(t) * fraction);
}

// zero_tokens: --zero-tokens; the other tokens' values are the same as without it (drawn, then
// the zero tokens' rows overwritten).
ActSet make_act_set(const LayerDesc& d, int64_t Tmax, uint64_t seed, int set, bool skew, double zero_tokens = 0) {
  const int64_t H = d.hidden, E = d.num_experts;
  ActSet a;
  a.hidden.resize(size_t(Tmax * H));
  a.logits.resize(size_t(Tmax * E));
  Rng rh(stream_seed(seed, kActStream - 2 * set, 0)), rl(stream_seed(seed, kActStream - 2 * set - 1, 0));
  for (auto& h : a.hidden) h = bf16_from_f32(rh.normal());
  if (zero_tokens > 0)
    for (int64_t t = 0; t < Tmax; ++t)
      if (zero_token(t, zero_tokens)) std::fill_n(a.hidden.begin() + t * H, H, uint16_t(0));
  std::vector<float> base(size_t(E), 0.0f);
  if (skew) {
    // Zipf-like: a random ranking per set, so hot experts differ between sets.
    std::vector<int64_t> perm(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) perm[size_t(e)] = e;
    for (int64_t i = E - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[rl.below(uint32_t(i + 1))]);
    for (int64_t r = 0; r < E; ++r) base[size_t(perm[size_t(r)])] = -kSkewSlope * std::log(1.0f + float(r));
  }
  for (int64_t t = 0; t < Tmax; ++t)
    for (int64_t e = 0; e < E; ++e) a.logits[size_t(t * E + e)] = base[size_t(e)] + rl.normal();
  return a;
}

std::vector<int64_t> sample_tokens(int64_t T) {
  const int64_t n = std::min<int64_t>(T, kCheckTokens);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) idx.push_back(n == 1 ? 0 : i * (T - 1) / (n - 1));
  return idx;
}

struct CheckResult {
  bool ran = false, pass = true;
  double rel_err = 0.0;
  double tol = 0.0;
  double ref_rms = 0.0;  // size of the reference outputs: the error is relative to this
  int tokens = 0;
};

// Per-token-count buffers of one set on the layer's device.
struct SetBuffers {
  Buffer hidden, logits, weights, ids, out;
  ForwardArgs fwd;
  RouteArgs rt;
};

// The GPU and its ceilings, measured once per process (before any run allocates).
struct Machine {
  bool measured = false;
  GpuInfo gpu;
  Ceilings ceil;
  bool floor_ok() const { return ceil.copy_ok && ceil.gemm_ok; }
};

void measure_machine(Machine* m, int device, bool ceilings) {
  if (m->measured) return;
  m->measured = true;
  m->gpu = cuda_gpu_info(device);
  if (ceilings) {
    std::fprintf(stderr, "measuring ceilings (device-to-device copy, cuBLAS bf16 GEMM) ...\n");
    m->ceil = measure_ceilings(device, kCeilingIters);
  } else {
    m->ceil.note = "not measured (--no-ceilings)";
  }
  const GpuInfo& g = m->gpu;
  std::printf("GPU: %s, %d SMs, L2 %.0f MiB, SM clock max %d MHz%s, memory clock max %d MHz%s\n", g.name.c_str(),
              g.sm_count, double(g.l2_bytes) / kMiB, g.sm_clock_max_mhz,
              g.sm_clock_now_mhz ? (" (now " + std::to_string(g.sm_clock_now_mhz) + ")").c_str() : "",
              g.mem_clock_max_mhz,
              g.mem_clock_now_mhz ? (" (now " + std::to_string(g.mem_clock_now_mhz) + ")").c_str() : "");
  const Ceilings& c = m->ceil;
  std::printf("ceilings (this process): copy %s, bf16 GEMM %s\n",
              c.copy_ok ? (std::to_string(c.copy_bytes_per_s / 1e12).substr(0, 5) + " TB/s (" +
                           std::to_string(c.copy_bytes >> 20) + " MiB device-to-device, read + written; " + c.copy_how +
                           ", cudaMemcpyAsync " + std::to_string(c.copy_memcpy_bytes_per_s / 1e12).substr(0, 5) +
                           ", copy kernel " + std::to_string(c.copy_kernel_bytes_per_s / 1e12).substr(0, 5) +
                           ", streaming " + std::to_string(c.copy_streaming_bytes_per_s / 1e12).substr(0, 5) + ")")
                              .c_str()
                        : "n/a",
              c.gemm_ok ? (std::to_string(c.gemm_flops_per_s / 1e12).substr(0, 6) + " TFLOP/s (" +
                           std::to_string(c.gemm_n) + "^3 cuBLAS, fp32 accumulation" +
                           (c.gemm_sustained_ok ? "; sustained after " + std::to_string(c.gemm_sustained_warm_s).substr(0, 4) +
                                                      " s back to back: " +
                                                      std::to_string(c.gemm_sustained_flops_per_s / 1e12).substr(0, 6) +
                                                      " TFLOP/s"
                                                : std::string()) +
                           ")").c_str()
                        : "n/a");
  if (!c.note.empty()) std::printf("ceilings note: %s\n", c.note.c_str());
}

json machine_json(const Machine& m, const std::string& device_name) {
  json j{{"device", device_name}};
  if (!m.measured) {
    j["gpu"] = nullptr;
    j["ceilings"] = nullptr;
    return j;
  }
  const GpuInfo& g = m.gpu;
  j["gpu"] = {{"name", g.name},
              {"sm_count", g.sm_count},
              {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
              {"l2_bytes", g.l2_bytes},
              {"memory_bytes", g.memory_bytes},
              {"sm_clock_max_mhz", g.sm_clock_max_mhz},
              {"mem_clock_max_mhz", g.mem_clock_max_mhz},
              {"mem_bus_bits", g.mem_bus_bits},
              {"sm_clock_now_mhz", g.sm_clock_now_mhz ? json(g.sm_clock_now_mhz) : json(nullptr)},
              {"mem_clock_now_mhz", g.mem_clock_now_mhz ? json(g.mem_clock_now_mhz) : json(nullptr)},
              {"driver", g.driver},
              {"nvml_note", g.nvml_note}};
  const Ceilings& c = m.ceil;
  j["ceilings"] = {{"copy_bytes", c.copy_bytes},
                   {"copy_us", c.copy_us},
                   {"copy_bytes_per_s", num_or_null(c.copy_ok, c.copy_bytes_per_s)},
                   {"copy_how", c.copy_how},
                   {"copy_memcpy_bytes_per_s", num_or_null(c.copy_ok, c.copy_memcpy_bytes_per_s)},
                   {"copy_kernel_bytes_per_s", num_or_null(c.copy_ok, c.copy_kernel_bytes_per_s)},
                   {"copy_streaming_bytes_per_s", num_or_null(c.copy_ok, c.copy_streaming_bytes_per_s)},
                   {"gemm_n", c.gemm_n},
                   {"gemm_us", c.gemm_us},
                   {"gemm_flops_per_s", num_or_null(c.gemm_ok, c.gemm_flops_per_s)},
                   {"gemm_sustained_warm_s", num_or_null(c.gemm_sustained_ok, c.gemm_sustained_warm_s)},
                   {"gemm_sustained_us", c.gemm_sustained_us},
                   {"gemm_sustained_flops_per_s", num_or_null(c.gemm_sustained_ok, c.gemm_sustained_flops_per_s)},
                   {"cublas", c.cublas},
                   {"note", c.note}};
  return j;
}

// How many weight copies keep `touched_bytes` per replay out of L2 across replays.
int copies_needed(double touched_bytes, size_t l2_bytes) {
  if (l2_bytes == 0 || touched_bytes <= 0) return 1;
  const double n = std::ceil(double(kL2Multiple) * double(l2_bytes) / touched_bytes);
  return int(std::clamp(n, 1.0, double(kMaxCopies)));
}

// Distinct experts of each set's routing of its first T tokens, on the host (the same
// routing method as the layer's): one count per set.
std::vector<double> touched_on_host(const LayerDesc& d, const std::vector<ActSet>& act, const std::vector<float>& bias,
                                    int64_t T) {
  const int64_t E = d.num_experts, k = d.top_k;
  std::vector<double> counts;
  std::vector<float> w(size_t(T * k));
  std::vector<int32_t> ids(size_t(T * k));
  for (const ActSet& a : act) {
    RouteArgs r;
    r.router_logits = TensorView::of(const_cast<float*>(a.logits.data()), DType::f32, {T, E});
    if (d.routing.method == RoutingMethod::sigmoid_grouped)
      r.correction_bias = TensorView::of(const_cast<float*>(bias.data()), DType::f32, {E});
    r.topk_weights = TensorView::of(w.data(), DType::f32, {T, k});
    r.topk_ids = TensorView::of(ids.data(), DType::i32, {T, k});
    r.top_k = k;
    r.routing = d.routing;
    route(r);
    counts.push_back(double(std::set<int32_t>(ids.begin(), ids.end()).size()));
  }
  return counts;
}

// Distinct experts that T tokens touch when each picks k of E uniformly: E (1 - (1 - k/E)^T).
double touched_if_uniform(int64_t E, int64_t k, int64_t T) {
  return double(E) * (1.0 - std::pow(1.0 - double(k) / double(E), double(T)));
}

// The sigmoid_grouped presets' correction bias: zero. A trained bias balances the experts'
// load, which is what uniform routing stands for; a random one (+-0.05, used until the twelfth
// run) concentrated kimi-k2 T = 128 on 311 experts instead of 358.
std::vector<float> correction_bias(const LayerDesc& d) { return std::vector<float>(size_t(d.num_experts), 0.0f); }

double rel_l2_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), ref.size()); ++i) {
    const double x = bf16_to_f32(a[i]), r = bf16_to_f32(ref[i]);
    num += (x - r) * (x - r);
    den += r * r;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct RunSpec {
  const Preset* preset;
  std::string quant;
};

// One preset and quantization, every token count. Returns its JSON entry; *failed when a
// check failed. Throws fp4moe::Error on a library or CUDA error.
json bench_one(const BenchOptions& o, const RunSpec& spec, const std::vector<int64_t>& tokens, bool check,
               Machine* machine, bool* failed) {
  const Preset* preset = spec.preset;
  LayerDesc desc = preset->desc;
  if (spec.quant == "w4a4") desc.act_quant = ActQuant::nvfp4;
  if (o.experts > 0) {
    const int64_t g = desc.routing.method == RoutingMethod::sigmoid_grouped ? desc.routing.n_group : 1;
    if (o.experts < desc.top_k || o.experts % g != 0)
      throw Error(ErrorKind::invalid_argument,
                  "--experts: got " + std::to_string(o.experts) + ", need a multiple of " + std::to_string(g) +
                      " (n_group) and >= " + std::to_string(desc.top_k) + " (top_k) for " + preset->name);
    desc.num_experts = o.experts;
  }
  const int64_t H = desc.hidden, I = desc.intermediate, E = desc.num_experts, k = desc.top_k;
  const int64_t Tmax = *std::max_element(tokens.begin(), tokens.end());
  const int64_t Tmin = *std::min_element(tokens.begin(), tokens.end());
  const bool biases = preset->has_bias;
  const std::string quant_label = desc.act_quant == ActQuant::nvfp4 ? "W4A4" : "W4A16";

  if (o.routing_only) {
    // The routing's spread, without weights or timing: per token count, the distinct experts
    // each set's tokens touch (routed on the host) against uniform routing's expectation.
    std::vector<ActSet> act;
    for (int s = 0; s < o.sets; ++s) act.push_back(make_act_set(desc, Tmax, o.seed, s, o.skew));
    const std::vector<float> bias = correction_bias(desc);
    std::printf("\n== %s: E=%lld k=%lld, %s routing%s, %d sets: experts touched\n", preset->name, (long long)E,
                (long long)k, to_string(desc.routing.method), o.skew ? " (--skew)" : "", o.sets);
    std::printf("  tokens      mean       min       max   uniform\n");
    json rows = json::array();
    for (int64_t T : tokens) {
      const std::vector<double> c = touched_on_host(desc, act, bias, T);
      double mean = 0;
      for (double x : c) mean += x / double(c.size());
      const double lo = *std::min_element(c.begin(), c.end()), hi = *std::max_element(c.begin(), c.end());
      const double uni = touched_if_uniform(E, k, T);
      std::printf("%8lld %9.1f %9.0f %9.0f %9.1f\n", (long long)T, mean, lo, hi, uni);
      rows.push_back({{"tokens", T},
                      {"experts_touched", mean},
                      {"experts_touched_per_set", c},
                      {"experts_touched_uniform", uni}});
    }
    return json{{"preset", preset->name}, {"model", preset->model}, {"desc", desc_json(desc)}, {"quant", spec.quant},
                {"routing_only", true}, {"sets", o.sets}, {"skew", o.skew}, {"seed", o.seed}, {"rows", rows}};
  }

  // ---- backend and memory --------------------------------------------------
  const Selection sel = select_backend(desc, o.backend);
  DeviceType bdev = DeviceType::cpu;
  for (const BackendInfo& b : backends())
    if (b.name == sel.backend) bdev = b.device;
  const bool on_cuda = bdev == DeviceType::cuda;
  if (o.warmup_ms > 0 && !on_cuda)
    throw std::invalid_argument("--warmup-ms: got " + std::to_string(o.warmup_ms) + " on the " + sel.backend +
                                " backend, need 0 (it warms a GPU to its sustained clocks)");
  // Sustained timing by default on CUDA: a GPU under load runs at its power cap's clock (v51).
  const double warmup_ms = o.warmup_ms >= 0 ? o.warmup_ms : (on_cuda ? kDefaultWarmupMs : 0.0);
  if (o.layers > 1 && !on_cuda)
    throw std::invalid_argument("--layers: got " + std::to_string(o.layers) + " on the " + sel.backend +
                                " backend, need 1 (it counts layer calls per CUDA graph)");
  const int iters = o.iters > 0 ? o.iters : (on_cuda ? 50 : 5);
  const int warmup = o.warmup >= 0 ? o.warmup : (on_cuda ? 10 : 1);
  const int sets = o.sets;
  if (on_cuda) measure_machine(machine, 0, o.ceilings);

  // Host: the synthetic checkpoint (kept until the copies and the baseline are built),
  // prepare's validated copy, a host backend's own layout (the reference backend reads the
  // validated copy), the activation sets, and the check oracle (at most kCheckTokens * k experts).
  const size_t per_expert = expert_weight_bytes(desc, biases);
  const size_t ckpt = per_expert * size_t(E);
  const size_t acts = size_t(sets) * size_t(Tmax) * size_t(H * 2 + E * 4);
  const size_t host_copies = 2 + (!on_cuda && sel.backend != "reference" ? 1 : 0);
  const size_t oracle = check ? 2 * per_expert * size_t(std::min<int64_t>(E, kCheckTokens * k)) : 0;
  const size_t host_need = host_copies * ckpt + acts + oracle;
  const size_t host_avail = mem_available();
  auto suggest = [&](double fits_fraction) {
    const int64_t g = std::max<int64_t>(8, desc.routing.method == RoutingMethod::sigmoid_grouped ? desc.routing.n_group : 1);
    int64_t e = int64_t(double(E) * fits_fraction * 0.9) / g * g;
    return std::max<int64_t>(e, g);
  };
  json run{{"preset", preset->name}, {"model", preset->model}, {"desc", desc_json(desc)},
           {"quant", spec.quant}, {"backend", sel.backend}, {"tokens", tokens}};
  // Not enough memory is not a failure of the library: say so, record it, move on.
  auto skip = [&](const std::string& why) {
    std::printf("%s\n", why.c_str());
    run["skipped"] = why;
    return run;
  };
  char why[256];
  if (host_avail > 0 && host_need > host_avail) {
    std::snprintf(why, sizeof why, "skipping %s %s: needs %.1f GiB of host memory, %.1f GiB available; try --experts %lld",
                  preset->name, quant_label.c_str(), host_need / kGiB, host_avail / kGiB,
                  (long long)suggest(double(host_avail - std::min(host_avail, acts + oracle)) / double(host_copies * ckpt)));
    return skip(why);
  }
  // Device: per-set activations (in, logits, routing, out) at Tmax, a check output, and a
  // workspace of a few activation sizes; the prepared weights come on top.
  const size_t dev_buffers = size_t(sets) * size_t(Tmax) * size_t(H * 4 + E * 4 + k * 8) + size_t(Tmax * H) * 4 +
                             size_t(Tmax) * size_t(k) * size_t(H + 2 * I) * 4;
  if (on_cuda) {
    size_t free_b = 0, total_b = 0;
    const size_t dev_need = ckpt + ckpt / 16 + dev_buffers;
    if (cuda_mem_info(0, &free_b, &total_b) && dev_need > free_b) {
      std::snprintf(why, sizeof why, "skipping %s %s: needs %.1f GiB of GPU memory, %.1f GiB free; try --experts %lld",
                    preset->name, quant_label.c_str(), dev_need / kGiB, free_b / kGiB,
                    (long long)suggest(double(free_b) / double(dev_need)));
      return skip(why);
    }
  }

  std::printf("\n== %s (%s): H=%lld I=%lld E=%lld k=%lld, %s %s, %s routing\n", preset->name, preset->model,
              (long long)H, (long long)I, (long long)E, (long long)k, to_string(desc.weight_format),
              quant_label.c_str(), to_string(desc.routing.method));
  std::printf("checkpoint: %.2f GiB (%.1f MiB per expert)\n", ckpt / kGiB, per_expert / kMiB);

  // The setup's phases, timed (stderr and the JSON): the benchmark's own cost, not the layer's.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  json setup_s = json::object();
  std::string setup_line;  // the phases in their order (the JSON object sorts its keys)
  Clock::time_point phase = Clock::now();
  auto lap = [&](const char* name) {
    const double sec = since(phase);
    setup_s[name] = std::round(sec * 100.0) / 100.0;
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %.2f s", setup_line.empty() ? "" : ", ", name, sec);
    setup_line += part;
    phase = Clock::now();
  };

  // ---- inputs ---------------------------------------------------------------
  std::vector<ActSet> act(static_cast<size_t>(sets));
  {
    // One thread per set: at 16384 tokens of H = 7168 each set is ~1e8 normal draws.
    std::vector<std::thread> th;
    for (int s = 0; s < sets; ++s)
      th.emplace_back([&, s] { act[size_t(s)] = make_act_set(desc, Tmax, o.seed, s, o.skew, o.zero_tokens); });
    for (auto& t : th) t.join();
  }
  const std::vector<float> corr_bias = correction_bias(desc);

  SynthOptions so;
  so.biases = biases;
  if (desc.act_quant == ActQuant::nvfp4) {
    // GEMM 1 input: amax of the activations the bench feeds / (6 * 448), as a calibrated
    // input_scale would be. GEMM 2 input: calibrated on the intermediate (synth.hpp).
    float amax = 0.0f;
    for (const auto& a : act)
      for (uint16_t h : a.hidden) amax = std::max(amax, std::fabs(bf16_to_f32(h)));
    so.a13_dq = amax > 0.0f ? amax / (kE2m1Max * kE4m3Max) : 1.0f;  // all zero: --zero-tokens 1
    std::vector<int32_t> calib_experts;
    for (int e = 0; e < std::min<int64_t>(E, kCalibExperts); ++e) calib_experts.push_back(e);
    const Synthetic calib = make_synthetic(desc, o.seed, calib_experts, so);
    const int64_t ct = std::min<int64_t>(Tmax, kCalibTokens);
    so.a2_dq = calibrate_a2_dq(calib, act[0].hidden, ct, kCalibExperts);
    std::printf("W4A4 input scales: w13 %.4g (amax of x / 2688), w2 %.4g (1.25 x amax of h on %lld tokens x %d experts / 2688)\n",
                so.a13_dq, so.a2_dq, (long long)ct, int(calib_experts.size()));
  }
  so.progress = true;
  lap("inputs");

  // ---- weights, copies, baseline ------------------------------------------------
  // The fewest experts any set touches at the smallest token count decides how many
  // copies keep every replay reading bytes that are not in L2.
  const size_t l2 = on_cuda ? machine->gpu.l2_bytes : 0;
  const std::vector<double> set_touched = touched_on_host(desc, act, corr_bias, Tmin);
  const double least_touched = *std::min_element(set_touched.begin(), set_touched.end());
  int want_copies = o.copies > 0 ? o.copies : copies_needed(least_touched * double(per_expert), l2);
  if (!on_cuda) want_copies = 1;
  std::vector<Layer> layers;
  std::unique_ptr<Bf16Baseline> baseline;
  std::string baseline_why, copies_note;
  {
    lap("routing_touched");
    Synthetic full = make_synthetic(desc, o.seed, {}, so);
    lap("synthetic_checkpoint");
    std::fflush(stdout);
    std::fprintf(stderr, "preparing %s ...\n", sel.backend.c_str());
    PrepareOptions po;
    po.backend = o.backend;  // the same request the ladder answered above, so the reason reads the same
    size_t free0 = 0, free1 = 0, total = 0;
    const bool mem = on_cuda && cuda_mem_info(0, &free0, &total);
    layers.push_back(Layer::prepare(desc, full.view(), po));
    lap("prepare");
    const size_t ws_max = layers[0].workspace_size(Tmax);
    if (want_copies > 1 && mem && cuda_mem_info(0, &free1, &total) && free0 > free1) {
      // What one prepared copy really occupies; keep room for the buffers and one bf16 copy.
      const size_t per_copy = free0 - free1;
      const size_t bf16_one = o.baseline ? Bf16Baseline::expert_bytes(desc, biases) * size_t(E) : 0;
      const size_t reserve = dev_buffers + ws_max + bf16_one + size_t(Tmax * k) * size_t(4 * H + 6 * I + 8) +
                             (size_t(1) << 30);
      const size_t room = free1 > reserve ? free1 - reserve : 0;
      const int fit = 1 + int(room / per_copy);
      if (fit < want_copies) {
        copies_note = "memory allows " + std::to_string(fit) + " of the " + std::to_string(want_copies) +
                      " weight copies wanted";
        want_copies = fit;
      }
      for (int c = 1; c < want_copies; ++c) layers.push_back(Layer::prepare(desc, full.view(), po));
      lap("prepare_copies");
    } else if (want_copies > 1 && on_cuda) {
      copies_note = "could not measure a copy's GPU memory: 1 weight copy";
      want_copies = 1;
    }
    if (on_cuda && o.baseline) {
      const double bf16_touched = least_touched * double(Bf16Baseline::expert_bytes(desc, biases));
      const int bcopies = o.copies > 0 ? o.copies : copies_needed(bf16_touched, l2);
      const size_t reserve = dev_buffers + ws_max + size_t(Tmax * k) * size_t(4 * H + 6 * I + 8) + (size_t(1) << 30);
      std::fprintf(stderr, "building the bf16 baseline (%d cop%s) ...\n", bcopies, bcopies == 1 ? "y" : "ies");
      baseline = Bf16Baseline::create(full, layers[0].device_id(), bcopies, reserve, &baseline_why);
      lap("baseline");
    } else {
      baseline_why = on_cuda ? "--no-baseline" : "n/a (no GPU)";
    }
  }  // the synthetic checkpoint is freed here
  lap("free_checkpoint");
  std::fprintf(stderr, "setup: %s\n", setup_line.c_str());
  Layer& layer = layers[0];
  const DeviceType dev = layer.device();
  const int dev_id = layer.device_id();
  const std::string device_name = dev == DeviceType::cuda ? cuda_device_name(dev_id) : cpu_name();
  const int copies = int(layers.size());
  std::printf("backend: %s on %s (%s)\n", layer.backend().c_str(), device_name.c_str(),
              layer.selection_reason().c_str());
  // --layers: what a graph replay holds, in the printed timing line and the JSON's "timing".
  const std::string per_graph =
      o.layers > 1 ? " of " + std::to_string(o.layers) + " layer calls (µs per call)" : std::string();
  const std::string replay = ", CUDA graph replay" + per_graph;
  char warm_s[64] = "";
  if (warmup_ms > 0) std::snprintf(warm_s, sizeof warm_s, " and %.0f ms of replays", warmup_ms);
  char zero_s[64] = "";
  if (o.zero_tokens > 0) std::snprintf(zero_s, sizeof zero_s, ", %.3g of the tokens zero", o.zero_tokens);
  std::printf("timing: median of %d runs after %d warmup%s, %d routing/activation sets rotated%s%s%s\n", iters, warmup,
              warm_s, sets, dev == DeviceType::cuda ? replay.c_str() : "", o.skew ? ", skewed routing" : "", zero_s);
  if (dev == DeviceType::cuda)
    std::printf("L2: %.0f MiB; fewest experts touched at T=%lld: %.0f = %.1f MiB; %d weight cop%s prepared "
                "(rotated while touched x copies < %d x L2)%s%s\n",
                double(l2) / kMiB, (long long)Tmin, least_touched, least_touched * double(per_expert) / kMiB, copies,
                copies == 1 ? "y" : "ies", kL2Multiple, copies_note.empty() ? "" : "; ", copies_note.c_str());
  if (baseline)
    std::printf("baseline: bf16 weights (%.1f MiB per expert, %d cop%s), cuBLAS grouped GEMM, group sizes from the "
                "host\n",
                double(Bf16Baseline::expert_bytes(desc, biases)) / kMiB, baseline->copies(),
                baseline->copies() == 1 ? "y" : "ies");
  else
    std::printf("baseline: %s\n", baseline_why.c_str());
  const bool floor_ok = dev == DeviceType::cuda && machine->floor_ok();
  if (dev != DeviceType::cuda)
    std::printf("ceilings: n/a (no GPU): floor, floor%% and the bf16 baseline are measured on a GPU only\n");
  if (!check) std::printf("check: off%s\n", o.check < 0 ? " (long token list; --check to force)" : "");
  std::printf("\n%8s %11s %9s %8s %7s %8s %10s %6s %11s %8s  %s\n", "tokens", "forward us", "route us", "experts",
              "TB/s", "TFLOP/s", "floor us", "floor%", "bf16 us", "speedup", "check");

  json rows = json::array();
  std::string timing_note;
  const double bf16_expert = double(Bf16Baseline::expert_bytes(desc, biases));

  for (const int64_t T : tokens) {
    // ---- buffers and routing ----
    const size_t ws_bytes = layer.workspace_size(T);
    Buffer ws(dev, dev_id, ws_bytes);
    std::vector<SetBuffers> sb(static_cast<size_t>(sets));
    for (int s = 0; s < sets; ++s) {
      SetBuffers& b = sb[size_t(s)];
      b.hidden = Buffer(dev, dev_id, size_t(T * H) * 2);
      b.hidden.upload(act[size_t(s)].hidden.data(), size_t(T * H) * 2);
      b.logits = Buffer(dev, dev_id, size_t(T * E) * 4);
      b.logits.upload(act[size_t(s)].logits.data(), size_t(T * E) * 4);
      b.weights = Buffer(dev, dev_id, size_t(T * k) * 4);
      b.ids = Buffer(dev, dev_id, size_t(T * k) * 4);
      b.out = Buffer(dev, dev_id, size_t(T * H) * 2);
      b.out.fill(0xFF);  // poisoned: the timed runs overwrite it
      b.rt.router_logits = b.logits.view(DType::f32, {T, E});
      b.rt.topk_weights = b.weights.view(DType::f32, {T, k});
      b.rt.topk_ids = b.ids.view(DType::i32, {T, k});
      b.rt.top_k = k;
      b.rt.routing = desc.routing;
      b.fwd.hidden_states = b.hidden.view(DType::bf16, {T, H});
      b.fwd.topk_weights = b.rt.topk_weights;
      b.fwd.topk_ids = b.rt.topk_ids;
      b.fwd.out = b.out.view(DType::bf16, {T, H});
      if (ws_bytes > 0) b.fwd.workspace = ws.view(DType::u8, {int64_t(ws_bytes)});
    }
    Buffer bias;
    if (desc.routing.method == RoutingMethod::sigmoid_grouped) {
      bias = Buffer(dev, dev_id, size_t(E) * 4);
      bias.upload(corr_bias.data(), size_t(E) * 4);
      for (auto& b : sb) b.rt.correction_bias = bias.view(DType::f32, {E});
    }
    for (auto& b : sb) route(b.rt);

    // experts touched: distinct local experts with >= 1 token, averaged over the sets
    double touched = 0;
    std::vector<std::vector<int32_t>> ids(size_t(sets), std::vector<int32_t>(size_t(T * k)));
    std::vector<std::vector<float>> wts(size_t(sets), std::vector<float>(size_t(T * k)));
    for (int s = 0; s < sets; ++s) {
      sb[size_t(s)].ids.download(ids[size_t(s)].data(), size_t(T * k) * 4);
      sb[size_t(s)].weights.download(wts[size_t(s)].data(), size_t(T * k) * 4);
      std::set<int32_t> d;
      for (int32_t e : ids[size_t(s)])
        if (e >= 0 && e < E) d.insert(e);
      touched += double(d.size());
    }
    touched /= sets;

    // Bytes that must move (touched weights with their scales, activations in and out,
    // the routing) and the two GEMMs' flops.
    const double act_bytes = double(T * H) * 2 * 2 + double(T * k) * 8;
    const double bytes = touched * double(per_expert) + act_bytes;
    const double flops = 2.0 * double(T) * double(k) * 3.0 * double(H) * double(I);

    // ---- check run: one forward into poisoned outputs, before timing ----
    // The check reads an fp32 out: the layer's sum before the output rounding (a bf16
    // out differs from an exact result by its own rounding, ~1e-3, more than the
    // tolerance); the timed runs write bf16.
    std::vector<float> out0(size_t(T * H));
    if (check) {
      Buffer check_out(dev, dev_id, size_t(T * H) * 4);
      check_out.fill(0xFF);  // NaN: anything forward leaves unwritten fails the check
      ForwardArgs a = sb[0].fwd;
      a.out = check_out.view(DType::f32, {T, H});
      layer.forward(a);
      if (dev == DeviceType::cuda) layer.check_device_errors(a.workspace);
      check_out.download(out0.data(), out0.size() * 4);
    }

    // ---- timing ----
    // Replay v reads set v % sets with weight copy v % n, n the copies this T needs: the
    // same weight bytes come back only every n replays, after >= kL2Multiple L2s of others.
    std::vector<double> fwd_us, route_us, base_us;
    ClockStats clocks;  // over the forward's timed replays (CUDA, NVML present)
    GraphNodeTimes node_times;
    node_times.rest_us = o.rest_us;
    int n_copies = 1, n_base_copies = 0;
    double base_rel = NAN;
    if (dev == DeviceType::cuda) {
      n_copies = std::min(copies, copies_needed(touched * double(per_expert), l2));
      const int variants = std::max(sets, n_copies);
      std::string note;
      fwd_us = time_cuda(dev_id, variants, [&](int v, void* stream) {
        ForwardArgs a = sb[size_t(v % sets)].fwd;
        a.stream = stream;
        layers[size_t(v % n_copies)].forward(a);
      }, warmup, iters, &note, o.nodes ? &node_times : nullptr, o.layers, warmup_ms, true, &clocks);
      if (!note.empty()) timing_note = "forward: " + note;
      note.clear();
      route_us = time_cuda(dev_id, sets, [&](int v, void* stream) {
        RouteArgs a = sb[size_t(v)].rt;
        a.stream = stream;
        route(a);
      }, warmup, iters, &note);
      if (!note.empty()) timing_note += (timing_note.empty() ? "" : "; ") + ("route: " + note);
      layer.check_device_errors(sb[0].fwd.workspace);

      if (baseline) {
        n_base_copies = std::min(baseline->copies(), copies_needed(touched * bf16_expert, l2));
        const int bvariants = std::max(sets, n_base_copies);
        std::vector<BaselineVariant> bv(static_cast<size_t>(bvariants));
        for (int v = 0; v < bvariants; ++v) {
          const SetBuffers& b = sb[size_t(v % sets)];
          bv[size_t(v)] = {ids[size_t(v % sets)].data(), b.fwd.topk_ids, b.fwd.topk_weights, b.fwd.hidden_states,
                           v % n_base_copies};
        }
        baseline->set_variants(T, bv);
        note.clear();
        base_us = time_cuda(dev_id, bvariants, [&](int v, void* stream) { baseline->run(v, stream); }, warmup,
                            iters, &note, nullptr, o.layers, warmup_ms);
        if (!note.empty()) timing_note += (timing_note.empty() ? "" : "; ") + ("baseline: " + note);
        // The baseline must compute the same layer, or its time means nothing: compare its
        // output for set 0 with fp4moe's (the last replay of set 0 left it in sb[0].out).
        baseline->run(0, nullptr);
        const std::vector<uint16_t> bo = baseline->output();
        std::vector<uint16_t> fo(size_t(T * H));
        sb[0].out.download(fo.data(), fo.size() * 2);
        base_rel = rel_l2_bf16(bo, fo);
      }
    } else {
      fwd_us = time_cpu(sets, [&](int v) { layer.forward(sb[size_t(v)].fwd); }, warmup, iters);
      route_us = time_cpu(sets, [&](int v) { route(sb[size_t(v)].rt); }, warmup, iters);
    }
    const double us = median(fwd_us), rus = median(route_us);
    const bool base_ok = !base_us.empty();
    const double bus = base_ok ? median(base_us) : NAN;
    const double tbs = bytes / (us * 1e-6) / 1e12, tflops = flops / (us * 1e-6) / 1e12;
    double floor_us = NAN;
    std::string bound;
    if (floor_ok) {
      const double mem_us = bytes / machine->ceil.copy_bytes_per_s * 1e6;
      const double math_us = flops / machine->ceil.gemm_flops_per_s * 1e6;
      floor_us = std::max(mem_us, math_us);
      bound = mem_us >= math_us ? "memory" : "compute";
    }
    // The same floor with the GEMM rate a long run keeps at the power cap (Ceilings).
    const bool sustained_ok = floor_ok && machine->ceil.gemm_sustained_ok;
    const double floor_sustained_us =
        sustained_ok ? std::max(bytes / machine->ceil.copy_bytes_per_s, flops / machine->ceil.gemm_sustained_flops_per_s) * 1e6
                     : NAN;
    const double agree_tol = desc.act_quant == ActQuant::nvfp4 ? kBaselineAgreeW4A4 : kBaselineAgreeW4A16;
    const bool base_agrees = !base_ok || (std::isfinite(base_rel) && base_rel <= agree_tol);

    // ---- check against the reference backend on sampled tokens ----
    CheckResult cr;
    if (check) {
      cr.ran = true;
      cr.tol = desc.act_quant == ActQuant::nvfp4 ? 2e-3 : 5e-4;
      const std::vector<int64_t> sample = sample_tokens(T);
      cr.tokens = int(sample.size());
      std::set<int32_t> need;
      for (int64_t t : sample)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t e = ids[0][size_t(t * k + j)];
          if (e >= 0 && e < E) need.insert(e);
        }
      SynthOptions ro = so;
      ro.progress = false;
      const Synthetic sub = make_synthetic(desc, o.seed, std::vector<int32_t>(need.begin(), need.end()), ro);
      PrepareOptions rp;
      rp.backend = "reference";
      const Layer ref = Layer::prepare(desc, sub.view(), rp);
      std::vector<uint8_t> rws(ref.workspace_size(1));
      std::vector<float> rout(static_cast<size_t>(H));
      double num = 0, den = 0, count = 0;
      bool nan = false;
      Progress prog("reference check", double(sample.size()), "tokens", true);
      for (size_t i = 0; i < sample.size(); ++i) {
        const int64_t t = sample[i];
        std::fill(rout.begin(), rout.end(), NAN);
        ForwardArgs a;
        a.hidden_states = TensorView::of(&act[0].hidden[size_t(t * H)], DType::bf16, {1, H});
        a.topk_weights = TensorView::of(&wts[0][size_t(t * k)], DType::f32, {1, k});
        a.topk_ids = TensorView::of(&ids[0][size_t(t * k)], DType::i32, {1, k});
        a.out = TensorView::of(rout.data(), DType::f32, {1, H});
        if (!rws.empty()) a.workspace = TensorView::of(rws.data(), DType::u8, {int64_t(rws.size())});
        ref.forward(a);
        for (int64_t h = 0; h < H; ++h) {
          const double r = rout[size_t(h)], b = out0[size_t(t * H + h)];
          if (std::isnan(r) || std::isnan(b)) nan = true;
          num += (b - r) * (b - r);
          den += r * r;
          count += 1;
        }
        prog.update(double(i + 1));
      }
      prog.finish();
      cr.rel_err = nan ? NAN : std::sqrt(num / std::max(den, 1e-30));
      cr.pass = !nan && cr.rel_err <= cr.tol;
      cr.ref_rms = std::sqrt(den / std::max(count, 1.0));
      *failed |= !cr.pass;
    }

    char check_s[96] = "-";
    if (cr.ran)
      std::snprintf(check_s, sizeof check_s, "%s (rel L2 %.2e, tol %.0e, %d tokens)", cr.pass ? "PASS" : "FAIL",
                    cr.rel_err, cr.tol, cr.tokens);
    char floor_s[16] = "n/a", frac_s[16] = "n/a", base_s[16] = "n/a", speed_s[16] = "n/a";
    if (floor_ok) {
      std::snprintf(floor_s, sizeof floor_s, "%.1f", floor_us);
      std::snprintf(frac_s, sizeof frac_s, "%.0f%%", 100.0 * floor_us / us);
    }
    if (base_ok) {
      std::snprintf(base_s, sizeof base_s, "%.1f", bus);
      std::snprintf(speed_s, sizeof speed_s, "%.2fx%s", bus / us, base_agrees ? "" : "?");
    }
    std::printf("%8lld %11.1f %9.1f %8.1f %7.3f %8.1f %10s %6s %11s %8s  %s\n", (long long)T, us, rus, touched, tbs,
                tflops, floor_s, frac_s, base_s, speed_s, check_s);
    // The clock the forward's timed replays ran at (scripts/ab_summary.py reads this line).
    if (clocks.samples > 0) {
      char power_s[48] = "";
      if (std::isfinite(clocks.power_w_mean)) std::snprintf(power_s, sizeof power_s, ", board %.0f W", clocks.power_w_mean);
      std::printf("%8s SM clock %.0f MHz (median of %d readings over the timed replays, min %.0f)%s\n", "",
                  clocks.sm_mhz_median, clocks.samples, clocks.sm_mhz_min, power_s);
    }
    if (o.nodes && dev == DeviceType::cuda) {
      if (node_times.note.empty()) {
        const std::string rest_s = o.rest_us > 0 ? ", each after " + std::to_string(o.rest_us) + " µs idle" : "";
        std::printf("%8s graph nodes in place, median µs of %d replays run one at a time (%.1f first to last "
                    "event%s):\n", "", iters, node_times.total_us, rest_s.c_str());
        for (size_t j = 0; j < node_times.names.size(); ++j)
          std::printf("%8s   %10.1f  %s\n", "", node_times.us[j], node_times.names[j].c_str());
      } else {
        std::printf("%8s graph nodes: not timed (%s)\n", "", node_times.note.c_str());
      }
    }
    if (!base_agrees)
      std::printf("%8s warning: bf16 baseline output differs from fp4moe's by rel L2 %.2e (> %.2g): its time "
                  "is suspect\n", "", base_rel, agree_tol);
    std::fflush(stdout);

    json row{{"tokens", T},
             {"forward_us_median", us},
             {"forward_us", samples_us(fwd_us)},
             {"tokens_per_s", double(T) / (us * 1e-6)},
             {"route_us_median", rus},
             {"route_us", samples_us(route_us)},
             {"experts_touched", touched},
             {"experts_touched_uniform", touched_if_uniform(E, k, T)},
             {"weight_copies_rotated", n_copies},
             {"bytes", bytes},
             {"flops", flops},
             {"tb_per_s", tbs},
             {"tflop_per_s", tflops},
             {"weight_gb_per_s", touched * double(per_expert) / (us * 1e-6) / 1e9},
             {"floor_us", num_or_null(floor_ok, floor_us)},
             {"floor_bound", floor_ok ? json(bound) : json(nullptr)},
             {"floor_fraction", num_or_null(floor_ok, floor_us / us)},
             {"floor_sustained_gemm_us", num_or_null(sustained_ok, floor_sustained_us)},
             {"floor_fraction_sustained_gemm", num_or_null(sustained_ok, floor_sustained_us / us)},
             {"baseline_us_median", num_or_null(base_ok, bus)},
             {"baseline_us", samples_us(base_us)},
             {"baseline_weight_copies_rotated", n_base_copies},
             {"baseline_bytes", touched * bf16_expert + act_bytes},
             {"baseline_rel_l2_vs_fp4moe", num_or_null(base_ok, base_rel)},
             {"baseline_agrees", base_agrees},
             {"speedup_vs_baseline", num_or_null(base_ok, bus / us)},
             {"clock_readings", clocks.samples},
             {"sm_clock_mhz_median", num_or_null(clocks.samples > 0, clocks.sm_mhz_median)},
             {"sm_clock_mhz_min", num_or_null(clocks.samples > 0, clocks.sm_mhz_min)},
             {"power_w_mean", num_or_null(clocks.samples > 0, clocks.power_w_mean)}};  // (NaN: null)
    if (o.nodes && dev == DeviceType::cuda) {
      json list = json::array();
      for (size_t j = 0; j < node_times.names.size(); ++j)
        list.push_back({{"name", node_times.names[j]}, {"us_median", node_times.us[j]}});
      row["graph_nodes"] = {{"nodes", list},
                            {"total_us_median", num_or_null(node_times.note.empty(), node_times.total_us)},
                            {"rest_us", o.rest_us},
                            {"note", node_times.note}};
    }
    if (cr.ran)
      row["check"] = {{"pass", cr.pass}, {"rel_l2", num_or_null(true, cr.rel_err)}, {"tolerance", cr.tol},
                      {"tokens", cr.tokens}, {"reference_rms", cr.ref_rms}};
    rows.push_back(row);
  }
  if (!timing_note.empty()) std::printf("note: %s\n", timing_note.c_str());

  run["backend"] = layer.backend();
  run["backend_reason"] = layer.selection_reason();
  run["device"] = device_name;
  run["iters"] = iters;
  run["layers_per_graph"] = o.layers;
  run["warmup_ms"] = warmup_ms;
  run["warmup"] = warmup;
  run["sets"] = sets;
  run["skew"] = o.skew;
  run["zero_tokens"] = o.zero_tokens;
  run["seed"] = o.seed;
  run["checked"] = check;
  run["expert_weight_bytes"] = per_expert;
  run["weight_copies"] = copies;
  run["weight_copies_note"] = copies_note;
  run["setup_seconds"] = setup_s;
  run["l2_multiple"] = kL2Multiple;
  run["baseline"] = {{"ran", baseline != nullptr},
                     {"why_not", baseline ? json(nullptr) : json(baseline_why)},
                     {"method", "bf16 weights (dequantized FP4), cublasGemmGroupedBatchedEx bf16 x bf16 -> bf16, "
                                "fp32 accumulation; own sort/gather/activation/combine kernels; group sizes "
                                "read on the host before capture"},
                     {"expert_bytes", size_t(bf16_expert)},
                     {"weight_copies", baseline ? baseline->copies() : 0}};
  run["timing"] = dev == DeviceType::cuda ? "cuda graph replay" + per_graph + ", cudaEvent per replay" : "std::chrono";
  run["timing_note"] = timing_note;
  run["rows"] = rows;
  return run;
}

int bench(const BenchOptions& o) {
  // ---- what to run ----
  std::vector<RunSpec> specs;
  const bool all = o.all || o.model == "all";
  if (all) {
    // The full table: every preset, NVFP4 ones as W4A16 and W4A4, gpt-oss as MXFP4 W4A16;
    // with --all, --model may name a comma-separated subset of the presets.
    std::set<std::string> only;
    if (o.all && !o.model.empty() && o.model != "all") {
      std::stringstream names(o.model);
      for (std::string n; std::getline(names, n, ',');) {
        if (!find_preset(n)) {
          std::fprintf(stderr, "fp4moe bench: --model: got '%s' in '%s', need preset names (fp4moe info lists them)\n",
                       n.c_str(), o.model.c_str());
          return 2;
        }
        only.insert(n);
      }
    }
    for (const Preset& p : presets()) {
      if (!only.empty() && !only.count(p.name)) continue;
      specs.push_back({&p, "w4a16"});
      if (p.desc.weight_format == WeightFormat::nvfp4) specs.push_back({&p, "w4a4"});
    }
  } else {
    if (o.model.empty()) {
      std::fprintf(stderr, "fp4moe bench: --model: got nothing, need a preset name or all (or --all)\n");
      return 2;
    }
    const Preset* preset = find_preset(o.model);
    if (!preset) {
      std::string names;
      for (const auto& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
      std::fprintf(stderr, "fp4moe bench: --model: got '%s', need one of %s, or all\n", o.model.c_str(),
                   names.c_str());
      return 2;
    }
    if (o.quant == "w4a4" && preset->desc.weight_format != WeightFormat::nvfp4) {
      std::fprintf(stderr, "fp4moe bench: --quant: got w4a4 for %s (%s weights), need an NVFP4 preset\n",
                   preset->name, to_string(preset->desc.weight_format));
      return 2;
    }
    specs.push_back({preset, o.quant});
  }
  if (o.layers > 1 && o.nodes) {
    std::fprintf(stderr, "fp4moe bench: --layers: got %d with --nodes, need 1 (the nodes are timed in a graph of one call)\n",
                 o.layers);
    return 2;
  }
  const std::vector<int64_t> tokens = all && !o.tokens_given ? kAllTokens : o.tokens;
  if (tokens.empty()) {
    std::fprintf(stderr, "fp4moe bench: --tokens: got nothing, need at least one token count\n");
    return 2;
  }
  for (int64_t T : tokens)
    if (T <= 0) {
      std::fprintf(stderr, "fp4moe bench: --tokens: got %lld, need counts >= 1\n", (long long)T);
      return 2;
    }
  // Checked by default, except the long speed runs (the full table, long token lists).
  const bool check = o.check > 0 || (o.check < 0 && !all && tokens.size() <= kCheckedListMax);

  // ---- the runs ----
  Machine machine;
  json runs = json::array();
  bool failed = false, error = false;
  std::string device_name = cpu_name();
  auto write_json = [&] {
    if (o.json_path.empty()) return true;
    json j{{"schema", "fp4moe-bench/2"},
           {"date", utc_now()},
           {"git_commit", git_commit()},
           {"version", version()},
           {"machine", machine_json(machine, device_name)},
           {"runs", runs}};
    std::ofstream f(o.json_path);
    f << json_text(j);
    return bool(f);
  };
  for (const RunSpec& spec : specs) {
    try {
      json r = bench_one(o, spec, tokens, check, &machine, &failed);
      if (r.contains("device")) device_name = r["device"].get<std::string>();
      runs.push_back(std::move(r));
    } catch (const std::exception& e) {
      // One preset's failure (a library error, not enough memory mid-run) must not lose
      // the others' results: record it and go on.
      std::fflush(stdout);
      std::fprintf(stderr, "fp4moe bench: %s %s: %s\n", spec.preset->name, spec.quant.c_str(), e.what());
      runs.push_back({{"preset", spec.preset->name}, {"quant", spec.quant}, {"error", e.what()}});
      error = true;
    }
    // Written after every run, so that a long --all that is stopped keeps what it measured.
    if (!write_json()) {
      std::fprintf(stderr, "fp4moe bench: --json: could not write %s\n", o.json_path.c_str());
      return 2;
    }
  }
  return error ? 2 : failed ? 1 : 0;
}

}  // namespace

int run_bench(const BenchOptions& o) {
  try {
    return bench(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "fp4moe bench: %s\n", e.what());
    return 2;
  }
}

}  // namespace fp4moe::cli
