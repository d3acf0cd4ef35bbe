// fp4moe bench: one preset's MoE layer on a synthetic checkpoint, timed per token count.
//
// Flow: pick the backend (the selection ladder), check host/device memory, draw the
// activation sets, calibrate W4A4 input scales, generate the packed weights, prepare,
// then per token count: route every set once, time forward and route (CUDA graphs on a
// GPU, std::chrono on the host), and with --check compare sampled tokens against a
// reference-backend layer built from the same experts, regenerated from the seed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fp4moe/format.h"
#include "fp4moe/presets.hpp"
#include "gpu.hpp"
#include "synth.hpp"

namespace fp4moe::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kCheckTokens = 8;          // sampled tokens per token count
constexpr int kCalibTokens = 2, kCalibExperts = 4;
constexpr float kSkewSlope = 1.5f;       // logit of the expert of rank r: -slope * ln(1 + r) + N(0, 1)

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

std::string git_commit() {
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

nlohmann::json desc_json(const LayerDesc& d) {
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

// One set of inputs at the largest token count; smaller counts use its first rows.
struct ActSet {
  std::vector<uint16_t> hidden;  // (Tmax, H) bf16 ~ N(0, 1)
  std::vector<float> logits;     // (Tmax, E) f32
};

ActSet make_act_set(const LayerDesc& d, int64_t Tmax, uint64_t seed, int set, bool skew) {
  const int64_t H = d.hidden, E = d.num_experts;
  ActSet a;
  a.hidden.resize(size_t(Tmax * H));
  a.logits.resize(size_t(Tmax * E));
  Rng rh(stream_seed(seed, kActStream - 2 * set, 0)), rl(stream_seed(seed, kActStream - 2 * set - 1, 0));
  for (auto& h : a.hidden) h = bf16_from_f32(rh.normal());
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

int bench(const BenchOptions& o) {
  const Preset* preset = find_preset(o.model);
  if (!preset) {
    std::string names;
    for (const auto& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
    std::fprintf(stderr, "fp4moe bench: --model: got '%s', need one of %s\n", o.model.c_str(), names.c_str());
    return 2;
  }
  LayerDesc desc = preset->desc;
  if (o.quant == "w4a4") {
    if (desc.weight_format != WeightFormat::nvfp4) {
      std::fprintf(stderr, "fp4moe bench: --quant: got w4a4 for %s (%s weights), need an NVFP4 preset\n",
                   preset->name, to_string(desc.weight_format));
      return 2;
    }
    desc.act_quant = ActQuant::nvfp4;
  }
  if (o.experts > 0) {
    const int64_t g = desc.routing.method == RoutingMethod::sigmoid_grouped ? desc.routing.n_group : 1;
    if (o.experts < desc.top_k || o.experts % g != 0) {
      std::fprintf(stderr, "fp4moe bench: --experts: got %lld, need a multiple of %lld (n_group) and >= %lld (top_k)\n",
                   (long long)o.experts, (long long)g, (long long)desc.top_k);
      return 2;
    }
    desc.num_experts = o.experts;
  }
  if (o.tokens.empty()) {
    std::fprintf(stderr, "fp4moe bench: --tokens: got nothing, need at least one token count\n");
    return 2;
  }
  for (int64_t T : o.tokens)
    if (T <= 0) {
      std::fprintf(stderr, "fp4moe bench: --tokens: got %lld, need counts >= 1\n", (long long)T);
      return 2;
    }
  const int64_t H = desc.hidden, I = desc.intermediate, E = desc.num_experts, k = desc.top_k;
  const int64_t Tmax = *std::max_element(o.tokens.begin(), o.tokens.end());
  const bool biases = preset->has_bias;

  // ---- backend and memory --------------------------------------------------
  const Selection sel = select_backend(desc, o.backend);
  DeviceType bdev = DeviceType::cpu;
  for (const BackendInfo& b : backends())
    if (b.name == sel.backend) bdev = b.device;
  const bool on_cuda = bdev == DeviceType::cuda;
  const int iters = o.iters > 0 ? o.iters : (on_cuda ? 50 : 5);
  const int warmup = o.warmup >= 0 ? o.warmup : (on_cuda ? 10 : 1);
  const int sets = o.sets;

  // Host: the synthetic checkpoint, prepare's validated copy, a host backend's own layout
  // (the reference backend reads the validated copy), the activation sets, and the
  // --check oracle (at most kCheckTokens * k experts).
  const size_t per_expert = expert_weight_bytes(desc, biases);
  const size_t ckpt = per_expert * size_t(E);
  const size_t acts = size_t(sets) * size_t(Tmax) * size_t(H * 2 + E * 4);
  const size_t copies = 2 + (!on_cuda && sel.backend != "reference" ? 1 : 0);
  const size_t oracle = o.check ? 2 * per_expert * size_t(std::min<int64_t>(E, kCheckTokens * k)) : 0;
  const size_t host_need = copies * ckpt + acts + oracle;
  const size_t host_avail = mem_available();
  auto suggest = [&](double fits_fraction) {
    const int64_t g = std::max<int64_t>(8, desc.routing.method == RoutingMethod::sigmoid_grouped ? desc.routing.n_group : 1);
    int64_t e = int64_t(double(E) * fits_fraction * 0.9) / g * g;
    return std::max<int64_t>(e, g);
  };
  // Not enough memory is not a failure of the library: say so, record it, exit 0.
  auto skip = [&](const std::string& why) {
    std::printf("%s\n", why.c_str());
    if (!o.json_path.empty()) {
      std::ofstream f(o.json_path);
      f << nlohmann::json{{"preset", preset->name}, {"desc", desc_json(desc)}, {"backend", sel.backend},
                          {"quant", o.quant}, {"skipped", why}, {"date", utc_now()}, {"git_commit", git_commit()}}
               .dump(2)
        << "\n";
    }
    return 0;
  };
  char why[256];
  if (host_avail > 0 && host_need > host_avail) {
    std::snprintf(why, sizeof why, "skipping %s: needs %.1f GiB of host memory, %.1f GiB available; try --experts %lld",
                  preset->name, host_need / kGiB, host_avail / kGiB,
                  (long long)suggest(double(host_avail - std::min(host_avail, acts + oracle)) / double(copies * ckpt)));
    return skip(why);
  }
  if (on_cuda) {
    size_t free_b = 0, total_b = 0;
    // Device: the prepared weights (padding of swizzled scales is small) plus per-set
    // activations and a workspace of a few activation sizes.
    const size_t dev_need = ckpt + ckpt / 16 + size_t(sets) * size_t(Tmax) * size_t(H * 4 + E * 4 + k * 8) +
                            size_t(Tmax) * size_t(k) * size_t(H + 2 * I) * 4;
    if (cuda_mem_info(0, &free_b, &total_b) && dev_need > free_b) {
      std::snprintf(why, sizeof why, "skipping %s: needs %.1f GiB of GPU memory, %.1f GiB free; try --experts %lld",
                    preset->name, dev_need / kGiB, free_b / kGiB, (long long)suggest(double(free_b) / double(dev_need)));
      return skip(why);
    }
  }

  std::printf("%s (%s): H=%lld I=%lld E=%lld k=%lld, %s %s, %s routing\n", preset->name, preset->model,
              (long long)H, (long long)I, (long long)E, (long long)k, to_string(desc.weight_format),
              desc.act_quant == ActQuant::nvfp4 ? "W4A4" : "W4A16", to_string(desc.routing.method));
  std::printf("checkpoint: %.2f GiB (%.1f MiB per expert)\n", ckpt / kGiB, per_expert / (1024.0 * 1024.0));

  // ---- inputs ---------------------------------------------------------------
  std::vector<ActSet> act;
  for (int s = 0; s < sets; ++s) act.push_back(make_act_set(desc, Tmax, o.seed, s, o.skew));
  std::vector<float> corr_bias(size_t(E), 0.0f);
  {
    Rng rb(stream_seed(o.seed, kActStream - 1000, 0));
    for (auto& b : corr_bias) b = 0.1f * (rb.uniform() - 0.5f);
  }

  SynthOptions so;
  so.biases = biases;
  if (desc.act_quant == ActQuant::nvfp4) {
    // GEMM 1 input: amax of the activations the bench feeds / (6 * 448), as a calibrated
    // input_scale would be. GEMM 2 input: calibrated on the intermediate (synth.hpp).
    float amax = 0.0f;
    for (const auto& a : act)
      for (uint16_t h : a.hidden) amax = std::max(amax, std::fabs(bf16_to_f32(h)));
    so.a13_dq = amax / (kE2m1Max * kE4m3Max);
    std::vector<int32_t> calib_experts;
    for (int e = 0; e < std::min<int64_t>(E, kCalibExperts); ++e) calib_experts.push_back(e);
    const Synthetic calib = make_synthetic(desc, o.seed, calib_experts, so);
    const int64_t ct = std::min<int64_t>(Tmax, kCalibTokens);
    so.a2_dq = calibrate_a2_dq(calib, act[0].hidden, ct, kCalibExperts);
    std::printf("W4A4 input scales: w13 %.4g (amax of x / 2688), w2 %.4g (1.25 x amax of h on %lld tokens x %d experts / 2688)\n",
                so.a13_dq, so.a2_dq, (long long)ct, int(calib_experts.size()));
  }
  so.progress = true;

  // ---- weights and prepare ----------------------------------------------------
  Layer layer = [&] {
    Synthetic full = make_synthetic(desc, o.seed, {}, so);
    std::fflush(stdout);
    std::fprintf(stderr, "preparing %s ...\n", sel.backend.c_str());
    PrepareOptions po;
    po.backend = o.backend;  // the same request the ladder answered above, so the reason reads the same
    return Layer::prepare(desc, full.view(), po);
  }();  // the synthetic checkpoint is freed here
  const DeviceType dev = layer.device();
  const int dev_id = layer.device_id();
  const std::string device_name = dev == DeviceType::cuda ? cuda_device_name(dev_id) : cpu_name();
  std::printf("backend: %s on %s (%s)\n", layer.backend().c_str(), device_name.c_str(),
              layer.selection_reason().c_str());
  std::printf("timing: median of %d runs after %d warmup, %d routing/activation sets rotated%s%s\n\n", iters,
              warmup, sets, dev == DeviceType::cuda ? ", CUDA graph replay" : "", o.skew ? ", skewed routing" : "");

  std::printf("%8s %12s %12s %12s %9s %10s  %s\n", "tokens", "forward us", "tokens/s", "route us", "experts",
              "GB/s", "check");
  nlohmann::json rows = nlohmann::json::array();
  bool any_fail = false;
  std::string timing_note;

  for (const int64_t T : o.tokens) {
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

    // ---- check run: one forward into poisoned outputs, before timing ----
    // The check reads an fp32 out: the layer's sum before the output rounding (a bf16
    // out differs from an exact result by its own rounding, ~1e-3, more than the
    // tolerance); the timed runs write bf16.
    std::vector<float> out0(size_t(T * H));
    if (o.check) {
      Buffer check_out(dev, dev_id, size_t(T * H) * 4);
      check_out.fill(0xFF);  // NaN: anything forward leaves unwritten fails --check
      ForwardArgs a = sb[0].fwd;
      a.out = check_out.view(DType::f32, {T, H});
      layer.forward(a);
      if (dev == DeviceType::cuda) layer.check_device_errors(a.workspace);
      check_out.download(out0.data(), out0.size() * 4);
    }

    // ---- timing ----
    std::vector<double> fwd_us, route_us;
    if (dev == DeviceType::cuda) {
      std::string note;
      fwd_us = time_cuda(dev_id, sets, [&](int v, void* stream) {
        ForwardArgs a = sb[size_t(v)].fwd;
        a.stream = stream;
        layer.forward(a);
      }, warmup, iters, &note);
      if (!note.empty()) timing_note = "forward: " + note;
      note.clear();
      route_us = time_cuda(dev_id, sets, [&](int v, void* stream) {
        RouteArgs a = sb[size_t(v)].rt;
        a.stream = stream;
        route(a);
      }, warmup, iters, &note);
      if (!note.empty()) timing_note += (timing_note.empty() ? "" : "; ") + ("route: " + note);
      layer.check_device_errors(sb[0].fwd.workspace);
    } else {
      fwd_us = time_cpu(sets, [&](int v) { layer.forward(sb[size_t(v)].fwd); }, warmup, iters);
      route_us = time_cpu(sets, [&](int v) { route(sb[size_t(v)].rt); }, warmup, iters);
    }
    const double us = median(fwd_us), rus = median(route_us);
    const double gbs = touched * double(per_expert) / (us * 1e-6) / 1e9;

    // ---- check against the reference backend on sampled tokens ----
    CheckResult cr;
    if (o.check) {
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
      any_fail |= !cr.pass;
    }

    char check[96] = "-";
    if (cr.ran)
      std::snprintf(check, sizeof check, "%s (rel L2 %.2e, tol %.0e, %d tokens)", cr.pass ? "PASS" : "FAIL",
                    cr.rel_err, cr.tol, cr.tokens);
    std::printf("%8lld %12.1f %12.0f %12.1f %9.1f %10.1f  %s\n", (long long)T, us, double(T) / (us * 1e-6), rus,
                touched, gbs, check);
    std::fflush(stdout);
    nlohmann::json row{{"tokens", T},
                       {"forward_us_median", us},
                       {"forward_us", fwd_us},
                       {"tokens_per_s", double(T) / (us * 1e-6)},
                       {"route_us_median", rus},
                       {"experts_touched", touched},
                       {"weight_gb_per_s", gbs}};
    if (cr.ran)
      row["check"] = {{"pass", cr.pass}, {"rel_l2", std::isnan(cr.rel_err) ? nlohmann::json(nullptr) : nlohmann::json(cr.rel_err)},
                      {"tolerance", cr.tol}, {"tokens", cr.tokens},
                      {"reference_rms", cr.ref_rms}};
    rows.push_back(row);
  }
  if (!timing_note.empty()) std::printf("note: %s\n", timing_note.c_str());

  if (!o.json_path.empty()) {
    nlohmann::json j{{"preset", preset->name},
                     {"model", preset->model},
                     {"desc", desc_json(desc)},
                     {"backend", layer.backend()},
                     {"backend_reason", layer.selection_reason()},
                     {"quant", o.quant},
                     {"tokens", o.tokens},
                     {"iters", iters},
                     {"warmup", warmup},
                     {"sets", sets},
                     {"skew", o.skew},
                     {"seed", o.seed},
                     {"expert_weight_bytes", per_expert},
                     {"device", device_name},
                     {"timing", dev == DeviceType::cuda ? "cuda graph replay, cudaEvent per replay" : "std::chrono"},
                     {"timing_note", timing_note},
                     {"date", utc_now()},
                     {"git_commit", git_commit()},
                     {"version", version()},
                     {"rows", rows}};
    std::ofstream f(o.json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "fp4moe bench: --json: could not write %s\n", o.json_path.c_str());
      return 2;
    }
  }
  return any_fail ? 1 : 0;
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
