// `fp4moe ep-bench`: the EP layer (fp4moe::ep) on every visible GPU of this machine, one
// thread per rank, against the single-GPU layer on GPU 0 measured in the same run.
//
// Per token count T (tokens per rank): µs of one EP forward (dispatch + experts + combine,
// the slowest rank, cudaEvent over `iters` back-to-back forwards after a barrier), µs of the
// single-GPU layer on T and on W*T tokens (the same total work), bytes one rank sends per
// forward with the fixed-capacity slabs, and (with --check) rank 0's output against the
// single-GPU layer on the same tokens: bit-identical for all_to_all with fp32 return.
#include "ep_bench.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4moe/ep.hpp"
#include "fp4moe/format.h"
#include "fp4moe/presets.hpp"
#include "json_text.hpp"
#include "synth.hpp"

namespace fp4moe::cli {
namespace {

using nlohmann::json;

#define EPB_CUDA(call)                                                                                  \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

// A cudaMalloc'd buffer on the current device.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { EPB_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 256))); }
  ~Dev() { (void)cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <class T>
  void up(const std::vector<T>& v) {
    if (!v.empty()) EPB_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
};

// One rank's tokens: x (T, H) bf16 ~N(0, 1), k distinct uniform experts, softmax-like weights.
struct Tokens {
  std::vector<uint16_t> x;
  std::vector<int32_t> ids;
  std::vector<float> w;
};

Tokens make_tokens(const LayerDesc& d, int64_t T, uint64_t seed) {
  Rng r(seed);
  Tokens t;
  t.x.resize(size_t(T * d.hidden));
  for (auto& v : t.x) v = bf16_from_f32(r.normal());
  t.ids.resize(size_t(T * d.top_k));
  t.w.resize(t.ids.size());
  std::vector<int32_t> pick;
  for (int64_t i = 0; i < T; ++i) {
    pick.clear();
    while (int64_t(pick.size()) < d.top_k) {
      const int32_t e = int32_t(r.below(uint32_t(d.num_experts)));
      if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
    }
    float sum = 0;
    for (int64_t j = 0; j < d.top_k; ++j) {
      t.ids[size_t(i * d.top_k + j)] = pick[size_t(j)];
      sum += t.w[size_t(i * d.top_k + j)] = 0.1f + r.uniform();
    }
    for (int64_t j = 0; j < d.top_k; ++j) t.w[size_t(i * d.top_k + j)] /= sum;
  }
  return t;
}

// µs per forward of the single-GPU layer on GPU 0; out f32 (T, H) returned when asked.
double time_single(const Layer& layer, const Tokens& tk, int64_t T, int iters, int warmup, std::vector<float>* out) {
  const LayerDesc& d = layer.desc();
  EPB_CUDA(cudaSetDevice(layer.device_id()));
  Dev x(tk.x.size() * 2), w(tk.w.size() * 4), ids(tk.ids.size() * 4), o(size_t(T * d.hidden) * 4);
  Dev ws(layer.workspace_size(T));
  x.up(tk.x);
  w.up(tk.w);
  ids.up(tk.ids);
  cudaStream_t s;
  EPB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ForwardArgs a;
  const int dev = layer.device_id();
  a.hidden_states = TensorView::of(x.p, DType::bf16, {T, d.hidden}, DeviceType::cuda, dev);
  a.topk_weights = TensorView::of(w.p, DType::f32, {T, d.top_k}, DeviceType::cuda, dev);
  a.topk_ids = TensorView::of(ids.p, DType::i32, {T, d.top_k}, DeviceType::cuda, dev);
  a.out = TensorView::of(o.p, DType::f32, {T, d.hidden}, DeviceType::cuda, dev);
  a.workspace = TensorView::of(ws.p, DType::u8, {int64_t(std::max<size_t>(layer.workspace_size(T), 1))},
                               DeviceType::cuda, dev);
  a.stream = s;
  for (int i = 0; i < warmup; ++i) layer.forward(a);
  cudaEvent_t e0, e1;
  EPB_CUDA(cudaEventCreate(&e0));
  EPB_CUDA(cudaEventCreate(&e1));
  EPB_CUDA(cudaEventRecord(e0, s));
  for (int i = 0; i < iters; ++i) layer.forward(a);
  EPB_CUDA(cudaEventRecord(e1, s));
  EPB_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  EPB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  if (out) {
    out->resize(size_t(T * d.hidden));
    EPB_CUDA(cudaMemcpy(out->data(), o.p, out->size() * 4, cudaMemcpyDeviceToHost));
  }
  layer.check_device_errors(a.workspace, s);
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  (void)cudaStreamDestroy(s);
  return 1000.0 * ms / iters;
}

struct RankOut {
  double us = 0;
  std::string error;
  std::vector<float> out;  // rank 0 only
  ep::Traffic traffic;
  ep::Capacity capacity;
};

// The rows the a2a capacities must hold for these tokens: the most one rank sends to one
// rank, and the most one expert receives from all ranks.
std::pair<int64_t, int64_t> rows_needed(const LayerDesc& d, const std::vector<Tokens>& tokens, int64_t T) {
  const int W = int(tokens.size());
  std::vector<int64_t> per_expert(size_t(d.num_experts), 0);
  int64_t slab = 0;
  for (const Tokens& t : tokens) {
    std::vector<int64_t> to(size_t(W), 0);
    for (int64_t s = 0; s < T * d.top_k; ++s) {
      const int32_t g = t.ids[size_t(s)];
      ++per_expert[size_t(g)];
      ++to[size_t(ep::owner_rank(d.num_experts, W, g))];
    }
    slab = std::max(slab, *std::max_element(to.begin(), to.end()));
  }
  return {slab, *std::max_element(per_expert.begin(), per_expert.end())};
}

}  // namespace

int run_ep_bench(const EpBenchOptions& o) {
  try {
    const Preset* preset = find_preset(o.model);
    if (!preset) {
      std::fprintf(stderr, "ep-bench: --model: got '%s', need a preset (fp4moe info lists them)\n", o.model.c_str());
      return 2;
    }
    LayerDesc desc = preset->desc;
    if (o.experts > 0) desc.num_experts = o.experts;
    if (o.quant == "w4a4") {
      if (desc.weight_format != WeightFormat::nvfp4) {
        std::fprintf(stderr, "ep-bench: --quant w4a4: %s has MXFP4 weights, need an NVFP4 preset\n", preset->name);
        return 2;
      }
      desc.act_quant = ActQuant::nvfp4;
    }
    if (std::string why = ep::why_unavailable(); !why.empty()) {
      std::printf("ep-bench: skipped: %s\n", why.c_str());
      return 0;
    }
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    const int W = o.gpus > 0 ? std::min(o.gpus, gpus) : gpus;
    if (W < 2) {
      std::printf("ep-bench: skipped: expert parallelism needs 2 GPUs, %d visible\n", gpus);
      return 0;
    }
    std::vector<ep::Mode> modes;
    if (o.mode == "a2a" || o.mode == "both") modes.push_back(ep::Mode::all_to_all);
    if (o.mode == "allreduce" || o.mode == "both") modes.push_back(ep::Mode::all_reduce);
    const ep::WireDType dispatch = o.dispatch == "nvfp4" ? ep::WireDType::nvfp4 : ep::WireDType::bf16;
    const ep::WireDType combine_dt = o.combine == "bf16" ? ep::WireDType::bf16 : ep::WireDType::f32;
    const int iters = o.iters > 0 ? o.iters : 20, warmup = o.warmup >= 0 ? o.warmup : 5;
    const int64_t Tmax = *std::max_element(o.tokens.begin(), o.tokens.end());
    std::printf("ep-bench: %s%s, E=%lld over %d GPUs, NCCL %s, tokens per rank up to %lld\n", preset->name,
                desc.act_quant == ActQuant::nvfp4 ? " W4A4" : " W4A16", (long long)desc.num_experts, W,
                ep::nccl_version().c_str(), (long long)Tmax);

    // Tokens of the largest T for every rank; smaller T take a prefix.
    std::vector<Tokens> tokens;
    for (int r = 0; r < W; ++r) tokens.push_back(make_tokens(desc, Tmax, o.seed * 1000 + uint64_t(r)));
    SynthOptions so;
    so.biases = preset->has_bias;
    if (desc.act_quant == ActQuant::nvfp4) {
      float amax = 0;
      for (const Tokens& t : tokens)
        for (uint16_t h : t.x) amax = std::max(amax, std::fabs(bf16_to_f32(h)));
      so.a13_dq = amax / (kE2m1Max * kE4m3Max);
      const Synthetic calib = make_synthetic(desc, o.seed, {0, 1, 2, 3}, so);
      so.a2_dq = calibrate_a2_dq(calib, tokens[0].x, std::min<int64_t>(Tmax, 64), 4);
    }
    so.progress = true;

    // The single-GPU layer on GPU 0, all experts.
    PrepareOptions po;
    po.backend = "cuda";
    po.device = 0;
    std::unique_ptr<Layer> single;
    {
      Synthetic full = make_synthetic(desc, o.seed, {}, so);
      single = std::make_unique<Layer>(Layer::prepare(desc, full.view(), po));
    }
    std::vector<int> devices;
    for (int r = 0; r < W; ++r) devices.push_back(r);
    std::vector<ep::Communicator> comms = ep::Communicator::init_all(devices);

    json results = json::array();
    std::printf("%-10s %6s %10s %10s %10s %8s %12s %12s %s\n", "mode", "T/rank", "ep_us", "1gpu_T", "1gpu_WT",
                "ep/1gpu", "sent_B/tok", "remote_B/fw", "check");
    for (ep::Mode mode : modes) {
      // one EpLayer per rank for this mode, resized per T with set_capacity (collective)
      std::vector<RankOut> outs(static_cast<size_t>(W));
      std::vector<std::unique_ptr<ep::EpLayer>> layers(static_cast<size_t>(W));
      std::barrier sync(W);
      std::vector<std::string> prep_err(static_cast<size_t>(W));
      {
        std::vector<std::thread> th;
        for (int r = 0; r < W; ++r)
          th.emplace_back([&, r] {
            try {
              EPB_CUDA(cudaSetDevice(r));
              const int64_t f = ep::first_expert(desc.num_experts, W, r);
              const int64_t n = ep::num_local_experts(desc.num_experts, W, r);
              std::vector<int32_t> mine;
              for (int64_t e = 0; e < n; ++e) mine.push_back(int32_t(f + e));
              SynthOptions sr = so;
              sr.progress = false;
              const Synthetic s = make_synthetic(desc, o.seed, mine, sr);
              CheckpointWeights w = s.view();
              w.expert_map = TensorView{};
              ep::EpDesc d;
              d.layer = desc;
              d.mode = mode;
              d.dispatch = dispatch;
              d.combine = combine_dt;
              d.capacity.max_tokens = Tmax;
              d.capacity.send_rows = d.capacity.expert_rows = 1;  // resized per T below
              layers[size_t(r)] = std::make_unique<ep::EpLayer>(ep::EpLayer::prepare(d, w, comms[size_t(r)].get()));
            } catch (const std::exception& e) {
              prep_err[size_t(r)] = e.what();
            }
          });
        for (auto& t : th) t.join();
      }
      for (const auto& e : prep_err)
        if (!e.empty()) throw std::runtime_error(e);

      for (int64_t T : o.tokens) {
        ep::Capacity cap;
        cap.max_tokens = T;
        if (o.capacity_factor > 0 && mode == ep::Mode::all_to_all) {
          const auto [slab, expert] = rows_needed(desc, tokens, T);
          cap.send_rows = std::max<int64_t>(1, int64_t(std::ceil(o.capacity_factor * double(slab))));
          cap.expert_rows = std::max<int64_t>(1, int64_t(std::ceil(o.capacity_factor * double(expert))));
        }
        std::vector<std::thread> th;
        for (int r = 0; r < W; ++r)
          th.emplace_back([&, r] {
            RankOut& ro = outs[size_t(r)];
            ro = RankOut{};
            try {
              EPB_CUDA(cudaSetDevice(r));
              ep::EpLayer& L = *layers[size_t(r)];
              L.set_capacity(cap);
              ro.capacity = L.desc().capacity;
              ro.traffic = L.traffic();
              // all_reduce: every rank holds the same tokens (rank 0's)
              const Tokens& tk = tokens[size_t(mode == ep::Mode::all_reduce ? 0 : r)];
              const int64_t H = desc.hidden, k = desc.top_k;
              Dev x(size_t(T * H) * 2), w(size_t(T * k) * 4), ids(size_t(T * k) * 4), out(size_t(T * H) * 4);
              Dev ws(L.workspace_size());
              EPB_CUDA(cudaMemcpy(x.p, tk.x.data(), size_t(T * H) * 2, cudaMemcpyHostToDevice));
              EPB_CUDA(cudaMemcpy(w.p, tk.w.data(), size_t(T * k) * 4, cudaMemcpyHostToDevice));
              EPB_CUDA(cudaMemcpy(ids.p, tk.ids.data(), size_t(T * k) * 4, cudaMemcpyHostToDevice));
              cudaStream_t s;
              EPB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
              ep::EpForwardArgs a;
              a.hidden_states = TensorView::of(x.p, DType::bf16, {T, H}, DeviceType::cuda, r);
              a.topk_weights = TensorView::of(w.p, DType::f32, {T, k}, DeviceType::cuda, r);
              a.topk_ids = TensorView::of(ids.p, DType::i32, {T, k}, DeviceType::cuda, r);
              a.out = TensorView::of(out.p, DType::f32, {T, H}, DeviceType::cuda, r);
              a.workspace = TensorView::of(ws.p, DType::u8, {int64_t(L.workspace_size())}, DeviceType::cuda, r);
              a.stream = s;
              for (int i = 0; i < warmup; ++i) L.forward(a);
              EPB_CUDA(cudaStreamSynchronize(s));
              sync.arrive_and_wait();
              cudaEvent_t e0, e1;
              EPB_CUDA(cudaEventCreate(&e0));
              EPB_CUDA(cudaEventCreate(&e1));
              EPB_CUDA(cudaEventRecord(e0, s));
              for (int i = 0; i < iters; ++i) L.forward(a);
              EPB_CUDA(cudaEventRecord(e1, s));
              EPB_CUDA(cudaEventSynchronize(e1));
              float ms = 0;
              EPB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
              ro.us = 1000.0 * ms / iters;
              if (r == 0) {
                ro.out.resize(size_t(T * H));
                EPB_CUDA(cudaMemcpy(ro.out.data(), out.p, ro.out.size() * 4, cudaMemcpyDeviceToHost));
              }
              try {
                L.check_device_errors(a.workspace, s);
              } catch (const std::exception& e) {
                ro.error = e.what();
              }
              (void)cudaEventDestroy(e0);
              (void)cudaEventDestroy(e1);
              (void)cudaStreamDestroy(s);
            } catch (const std::exception& e) {
              ro.error = e.what();
            }
          });
        for (auto& t : th) t.join();

        double ep_us = 0;
        std::string err;
        for (const RankOut& ro : outs) {
          ep_us = std::max(ep_us, ro.us);
          if (!ro.error.empty() && err.empty()) err = ro.error;
        }
        std::vector<float> ref;
        const double us1 = time_single(*single, tokens[0], T, iters, warmup, o.check ? &ref : nullptr);
        // the same total work on one GPU: all ranks' tokens (W*T); the all_reduce ranks share theirs
        double usW = 0;
        if (mode == ep::Mode::all_to_all) {
          Tokens all;
          for (int r = 0; r < W; ++r) {
            const Tokens& t = tokens[size_t(r)];
            all.x.insert(all.x.end(), t.x.begin(), t.x.begin() + T * desc.hidden);
            all.ids.insert(all.ids.end(), t.ids.begin(), t.ids.begin() + T * desc.top_k);
            all.w.insert(all.w.end(), t.w.begin(), t.w.begin() + T * desc.top_k);
          }
          usW = time_single(*single, all, W * T, iters, warmup, nullptr);
        }
        std::string check = "-";
        size_t differing = 0;
        double rel = 0;
        if (o.check && err.empty()) {
          double num = 0, den = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            const double dlt = double(outs[0].out[i]) - ref[i];
            num += dlt * dlt;
            den += double(ref[i]) * ref[i];
            differing += std::memcmp(&outs[0].out[i], &ref[i], 4) != 0;
          }
          rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
          const double tol = desc.act_quant == ActQuant::nvfp4 ? 2e-3 : 5e-4;
          char buf[96];
          std::snprintf(buf, sizeof buf, "%s (%zu differ, rel %.2g)", rel <= tol ? "ok" : "FAIL", differing, rel);
          check = buf;
        } else if (!err.empty()) {
          check = "ERROR: " + err;
        }
        const ep::Traffic& tr = outs[0].traffic;
        const double sent_per_tok = double(tr.dispatch_bytes + tr.combine_bytes) / double(T);
        std::printf("%-10s %6lld %10.1f %10.1f %10s %8.2f %12.0f %12zu %s\n", ep::to_string(mode), (long long)T, ep_us,
                    us1, usW > 0 ? std::to_string(int64_t(std::lround(usW))).c_str() : "-", ep_us / us1, sent_per_tok,
                    tr.remote_bytes, check.c_str());
        results.push_back({{"mode", ep::to_string(mode)},
                           {"tokens_per_rank", T},
                           {"world", W},
                           {"ep_us", ep_us},
                           {"single_gpu_us_T", us1},
                           {"single_gpu_us_WT", usW > 0 ? json(usW) : json(nullptr)},
                           {"dispatch_bytes", tr.dispatch_bytes},
                           {"combine_bytes", tr.combine_bytes},
                           {"remote_bytes", tr.remote_bytes},
                           {"bytes_per_token", sent_per_tok},
                           {"send_rows", outs[0].capacity.send_rows},
                           {"expert_rows", outs[0].capacity.expert_rows},
                           {"check", check},
                           {"differing_elements", differing},
                           {"rel_l2", rel}});
      }
    }
    if (!o.json_path.empty()) {
      json doc = {{"model", preset->name},
                  {"quant", o.quant},
                  {"experts", desc.num_experts},
                  {"dispatch", ep::to_string(dispatch)},
                  {"combine", ep::to_string(combine_dt)},
                  {"capacity_factor", o.capacity_factor},
                  {"nccl", ep::nccl_version()},
                  {"iters", iters},
                  {"results", results}};
      std::ofstream(o.json_path) << json_text(doc);
    }
    for (const auto& r : results)
      if (r["check"].get<std::string>().rfind("FAIL", 0) == 0 || r["check"].get<std::string>().rfind("ERROR", 0) == 0)
        return 1;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ep-bench: %s\n", e.what());
    return 2;
  }
}

}  // namespace fp4moe::cli

#else  // !FP4MOE_WITH_CUDA

#include <cstdio>

namespace fp4moe::cli {
int run_ep_bench(const EpBenchOptions&) {
  std::printf("ep-bench: skipped: this build has no CUDA backend\n");
  return 0;
}
}  // namespace fp4moe::cli

#endif
