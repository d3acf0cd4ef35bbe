// Problem generator and conformance table (see moe_fixtures.hpp).
#include "moe_fixtures.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <cstring>
#include <numeric>

#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "reference/reference.hpp"

namespace fp4moe::testing {
namespace {

// splitmix64: fast enough to draw the ~10^9 values of a real-size layer in seconds.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  int64_t below(int64_t n) { return int64_t(next() % uint64_t(n)); }
  // Irwin-Hall(4), rescaled to std 1: bell-shaped with |x| <= 3.46, which keeps the
  // activation amax (and so the W4A4 input scales) predictable.
  float normal() {
    const uint64_t r = next();
    float sum = 0.0f;
    for (int i = 0; i < 4; ++i) sum += float((r >> (16 * i)) & 0xFFFF) * (1.0f / 65536.0f);
    return (sum - 2.0f) * 1.7320508f;
  }
};

constexpr float kWeightStd = 0.05f;

// Typical |h| of silu(g)*u when x has std 1 and weights std kWeightStd: g, u have std
// sg = kWeightStd * sqrt(H); a bell-shaped product peaks near (3 sg)^2.
float typical_h_amax(int64_t H) {
  const float sg = kWeightStd * std::sqrt(float(H));
  return 9.0f * sg * sg;
}

// Fill rows (rows, K) of data/scale for one expert matrix: either the canonical quantizer
// applied to fresh fp32 weights (returns the weight dq_scale), or codes drawn directly.
float fill_matrix(Rng& rng, const MoECase& c, int64_t rows, int64_t K, uint8_t* data, uint8_t* scale,
                  std::vector<float>& tmp) {
  const int block = c.wf == WeightFormat::nvfp4 ? kNvfp4Block : kMxfp4Block;
  const float std_e = kWeightStd * (0.75f + 0.5f * rng.uniform());  // experts differ in scale
  if (c.random_codes) {
    // e2m1 codes uniform over all 16 (rms value ~2.9); block scales spread over 2 octaves.
    for (int64_t i = 0; i < rows * K / 2; i += 8) {  // K/2 is a multiple of 8
      const uint64_t r = rng.next();
      std::memcpy(data + i, &r, 8);
    }
    // positive e4m3 codes are ordered like their values: codes uniform in [96, 384]
    // (mean value ~220); e8m0 codes 2^-8 or 2^-7. One draw gives 8 codes.
    const bool nv = c.wf == WeightFormat::nvfp4;
    const uint8_t lo = nv ? e4m3_from_f32(96.0f) : uint8_t(127 - 8);
    const uint8_t span = nv ? uint8_t(e4m3_from_f32(384.0f) - lo + 1) : 2;
    uint64_t r = 0;
    for (int64_t i = 0; i < rows * K / block; ++i, r >>= 8) {
      if (i % 8 == 0) r = rng.next();
      scale[i] = uint8_t(lo + (r & 0xFF) % span);
    }
    return nv ? std_e / (2.9f * 220.0f) : 1.0f;
  }
  tmp.resize(size_t(rows * K));
  float amax = 0.0f;
  for (float& v : tmp) {
    v = std_e * rng.normal();
    amax = std::max(amax, std::fabs(v));
  }
  if (c.wf == WeightFormat::mxfp4) {
    detail::mxfp4_quantize_rows(tmp.data(), rows, K, data, scale);
    return 1.0f;
  }
  const float dq = detail::nvfp4_weight_dq_scale(amax);
  detail::nvfp4_quantize_rows(tmp.data(), rows, K, 1.0f / dq, data, scale);
  return dq;
}

// k distinct experts of [0, E), drawn with probability proportional to p (p may be null:
// uniform). Sequential draws without replacement.
void draw_distinct(Rng& rng, int64_t E, int64_t k, const std::vector<double>* p, int32_t* ids) {
  std::vector<char> used(E, 0);
  for (int64_t j = 0; j < k; ++j) {
    if (!p) {
      int64_t e;
      do e = rng.below(E);
      while (used[e]);
      used[e] = 1;
      ids[j] = int32_t(e);
      continue;
    }
    double total = 0;
    for (int64_t e = 0; e < E; ++e) total += used[e] ? 0.0 : (*p)[e];
    double u = double(rng.uniform()) * total;
    int64_t pick = -1;
    for (int64_t e = 0; e < E; ++e) {
      if (used[e]) continue;
      pick = e;
      if ((u -= (*p)[e]) < 0) break;
    }
    used[pick] = 1;
    ids[j] = int32_t(pick);
  }
}

TensorView view_of(const void* data, DType t, std::initializer_list<int64_t> shape) {
  return TensorView::of(data, t, shape);
}

}  // namespace

TensorView MoEProblem::hidden_view() const { return view_of(x.data(), DType::bf16, {c.T, c.H}); }
TensorView MoEProblem::topk_weights_view() const { return view_of(topk_weights.data(), DType::f32, {c.T, c.k}); }
TensorView MoEProblem::topk_ids_view() const { return view_of(topk_ids.data(), DType::i32, {c.T, c.k}); }

MoEProblem make_problem(const MoECase& c) {
  MoEProblem p;
  p.c = c;
  const int64_t H = c.H, I = c.I, E = c.E, EL = c.E_local > 0 ? c.E_local : c.E, T = c.T, k = c.k;
  const int block = c.wf == WeightFormat::nvfp4 ? kNvfp4Block : kMxfp4Block;
  Rng rng(c.seed);

  LayerDesc& d = p.desc;
  d.hidden = H;
  d.intermediate = I;
  d.num_experts = E;
  d.top_k = k;
  d.weight_format = c.wf;
  d.act_quant = c.aq;
  d.activation = c.act;
  d.gate_up = c.gate_up;

  // --- weights, canonical (concat gate | up) --------------------------------------------
  auto hw = std::make_shared<detail::HostWeights>();
  hw->desc = d;
  hw->num_local = EL;
  hw->block = block;
  hw->w13.resize(size_t(EL * 2 * I * H / 2));
  hw->w13_scale.resize(size_t(EL * 2 * I * H / block));
  hw->w2.resize(size_t(EL * H * I / 2));
  hw->w2_scale.resize(size_t(EL * H * I / block));
  hw->w13_dq.resize(EL);
  hw->w2_dq.resize(EL);
  // Experts are drawn in parallel, each from its own stream (seed, e): the problem does
  // not depend on the thread count, and a full-size layer builds in seconds.
  std::atomic<int64_t> next_expert{0};
  auto worker = [&] {
    std::vector<float> tmp;
    for (int64_t e; (e = next_expert.fetch_add(1)) < EL;) {
      Rng er(c.seed * 0x100000001B3ull + uint64_t(e) + 1);
      // gate and up quantized as one (2I, H) tensor: they share one dq_scale (SPEC §2)
      hw->w13_dq[e] = fill_matrix(er, c, 2 * I, H, hw->w13.data() + e * 2 * I * H / 2,
                                  hw->w13_scale.data() + e * 2 * I * H / block, tmp);
      hw->w2_dq[e] = fill_matrix(er, c, H, I, hw->w2.data() + e * H * I / 2, hw->w2_scale.data() + e * H * I / block, tmp);
    }
  };
  {
    const int64_t n = std::min<int64_t>(EL, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int64_t i = 1; i < n; ++i) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }
  if (c.bias) {
    hw->w13_bias.resize(size_t(EL * 2 * I));
    hw->w2_bias.resize(size_t(EL * H));
    for (float& b : hw->w13_bias) b = round_bf16(0.1f * rng.normal());
    for (float& b : hw->w2_bias) b = round_bf16(0.1f * rng.normal());
  }
  if (c.aq == ActQuant::nvfp4) {
    // per-expert calibrations around the typical amax (x: |x| <= 3.46); the layer uses the max
    p.w13_input_scale.resize(EL);
    p.w2_input_scale.resize(EL);
    const float h_amax = typical_h_amax(H);
    for (int64_t e = 0; e < EL; ++e) {
      p.w13_input_scale[e] = 3.0f * (0.8f + 0.4f * rng.uniform()) / (6.0f * 448.0f);
      p.w2_input_scale[e] = h_amax * (0.8f + 0.4f * rng.uniform()) / (6.0f * 448.0f);
    }
    hw->a13_dq = *std::max_element(p.w13_input_scale.begin(), p.w13_input_scale.end());
    hw->a2_dq = *std::max_element(p.w2_input_scale.begin(), p.w2_input_scale.end());
  }

  // --- expert map ---------------------------------------------------------------------
  hw->expert_map.resize(E);
  std::iota(hw->expert_map.begin(), hw->expert_map.end(), 0);
  if (EL < E) {
    // even seeds: a contiguous range of globals; odd seeds: a random subset whose local
    // ids are shuffled (the map need not be monotone)
    std::fill(hw->expert_map.begin(), hw->expert_map.end(), -1);
    std::vector<int32_t> glob(E);
    std::iota(glob.begin(), glob.end(), 0);
    if (c.seed % 2 == 0) {
      const int64_t start = (E - EL) / 2;
      for (int64_t l = 0; l < EL; ++l) hw->expert_map[start + l] = int32_t(l);
    } else {
      for (int64_t i = E - 1; i > 0; --i) std::swap(glob[i], glob[rng.below(i + 1)]);
      for (int64_t l = 0; l < EL; ++l) hw->expert_map[glob[l]] = int32_t(l);
    }
    p.expert_map = hw->expert_map;
  }
  p.host = hw;

  // --- checkpoint views ---------------------------------------------------------------
  CheckpointWeights& w = p.weights;
  const DType sdt = c.wf == WeightFormat::nvfp4 ? DType::e4m3 : DType::e8m0;
  const uint8_t* w13 = hw->w13.data();
  const uint8_t* w13s = hw->w13_scale.data();
  // checkpoint row of canonical row r (gate r < I, up r >= I)
  auto ckpt_row = [&](int64_t r) { return c.gate_up == GateUpLayout::concat ? r : r < I ? 2 * r : 2 * (r - I) + 1; };
  if (c.gate_up == GateUpLayout::interleaved) {
    p.ckpt_w13.resize(hw->w13.size());
    p.ckpt_w13_scale.resize(hw->w13_scale.size());
    for (int64_t e = 0; e < EL; ++e)
      for (int64_t r = 0; r < 2 * I; ++r) {
        const int64_t cr = e * 2 * I + ckpt_row(r), hr = e * 2 * I + r;
        std::copy_n(hw->w13.data() + hr * H / 2, H / 2, p.ckpt_w13.data() + cr * H / 2);
        std::copy_n(hw->w13_scale.data() + hr * H / block, H / block, p.ckpt_w13_scale.data() + cr * H / block);
      }
    w13 = p.ckpt_w13.data();
    w13s = p.ckpt_w13_scale.data();
  }
  w.w13 = view_of(w13, DType::u8, {EL, 2 * I, H / 2});
  w.w13_scale = view_of(w13s, sdt, {EL, 2 * I, H / block});
  w.w2 = view_of(hw->w2.data(), DType::u8, {EL, H, I / 2});
  w.w2_scale = view_of(hw->w2_scale.data(), sdt, {EL, H, I / block});
  if (c.wf == WeightFormat::nvfp4) {
    w.w13_scale_2 = view_of(hw->w13_dq.data(), DType::f32, {EL});
    w.w2_scale_2 = view_of(hw->w2_dq.data(), DType::f32, {EL});
  }
  if (c.aq == ActQuant::nvfp4) {
    w.w13_input_scale = view_of(p.w13_input_scale.data(), DType::f32, {EL});
    w.w2_input_scale = view_of(p.w2_input_scale.data(), DType::f32, {EL});
  }
  if (c.bias) {
    p.ckpt_w13_bias.resize(hw->w13_bias.size());
    p.ckpt_w2_bias.resize(hw->w2_bias.size());
    for (int64_t e = 0; e < EL; ++e)
      for (int64_t r = 0; r < 2 * I; ++r)
        p.ckpt_w13_bias[e * 2 * I + ckpt_row(r)] = bf16_from_f32(hw->w13_bias[e * 2 * I + r]);
    for (size_t i = 0; i < hw->w2_bias.size(); ++i) p.ckpt_w2_bias[i] = bf16_from_f32(hw->w2_bias[i]);
    w.w13_bias = view_of(p.ckpt_w13_bias.data(), DType::bf16, {EL, 2 * I});
    w.w2_bias = view_of(p.ckpt_w2_bias.data(), DType::bf16, {EL, H});
  }
  if (!p.expert_map.empty()) w.expert_map = view_of(p.expert_map.data(), DType::i32, {E});

  // --- activations and routing ----------------------------------------------------------
  p.x.resize(size_t(T * H));
  for (uint16_t& v : p.x) v = bf16_from_f32(rng.normal());
  p.out_init.resize(size_t(T * H));
  for (uint16_t& v : p.out_init) v = bf16_from_f32(rng.normal());

  p.topk_ids.assign(size_t(T * k), -1);
  p.topk_weights.assign(size_t(T * k), 0.0f);
  std::vector<double> zipf;
  if (c.routing == Routing::skewed) {
    std::vector<int64_t> rank(E);
    std::iota(rank.begin(), rank.end(), 0);
    for (int64_t i = E - 1; i > 0; --i) std::swap(rank[i], rank[rng.below(i + 1)]);
    zipf.resize(E);
    for (int64_t e = 0; e < E; ++e) zipf[e] = 1.0 / std::pow(double(rank[e] + 1), 1.5);
  }
  for (int64_t t = 0; t < T; ++t) {
    int32_t* ids = p.topk_ids.data() + t * k;
    float* wts = p.topk_weights.data() + t * k;
    if (c.routing == Routing::one_expert) {
      // expert 0 in slot 0, the others distinct among 1..E-1
      ids[0] = 0;
      draw_distinct(rng, E - 1, k - 1, nullptr, ids + 1);
      for (int64_t j = 1; j < k; ++j) ids[j] += 1;
    } else {
      draw_distinct(rng, E, k, c.routing == Routing::skewed ? &zipf : nullptr, ids);
    }
    // normalized to sum 1, except k = 1, where a weight of exactly 1 would hide where it
    // is applied (router weight on input)
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += (wts[j] = 0.1f + rng.uniform());
    if (k > 1)
      for (int64_t j = 0; j < k; ++j) wts[j] /= sum;
    else
      wts[0] = 0.5f + 0.5f * rng.uniform();
    if (c.routing == Routing::with_invalid)
      for (int64_t j = 0; j < k; ++j)
        if (t == 0 || rng.below(4) == 0) ids[j] = -1;
    if (c.routing == Routing::repeated && k >= 2) ids[1] = ids[0];
  }
  return p;
}

std::vector<float> run_reference(const MoEProblem& p, DType out_dtype) {
  const int64_t T = p.c.T, H = p.c.H;
  std::vector<uint8_t> out(size_t(T * H) * dtype_size(out_dtype));
  for (int64_t i = 0; i < T * H; ++i)
    detail::write_activation(out.data(), out_dtype, i, p.c.accumulate ? bf16_to_f32(p.out_init[i]) : 0.0f);
  std::vector<float> scratch(detail::reference_scratch_floats(*p.host));
  ForwardArgs a;
  a.hidden_states = p.hidden_view();
  a.topk_weights = p.topk_weights_view();
  a.topk_ids = p.topk_ids_view();
  a.out = TensorView::of(out.data(), out_dtype, {T, H});
  a.apply_router_weight_on_input = p.c.router_weight_on_input;
  a.accumulate = p.c.accumulate;
  detail::reference_forward(*p.host, a, scratch.data());
  std::vector<float> r(size_t(T * H));
  for (int64_t i = 0; i < T * H; ++i) r[i] = detail::read_activation(out.data(), out_dtype, i);
  return r;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

float tolerance(const MoECase& c) { return c.aq == ActQuant::nvfp4 ? 2e-3f : 5e-4f; }

std::vector<float> bf16_to_float(const std::vector<uint16_t>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_f32(v[i]);
  return r;
}

// ---------------------------------------------------------------------------
// The conformance table
// ---------------------------------------------------------------------------
MoECase small_api_case(const std::string& name, int64_t T, uint64_t seed) {
  MoECase c;
  c.name = name;
  c.H = 64;
  c.I = 32;
  c.E = 4;
  c.k = 2;
  c.T = T;
  c.seed = seed;
  return c;
}

std::vector<MoECase> conformance_cases(bool include_full_size) {
  using WF = WeightFormat;
  using AQ = ActQuant;
  using A = Activation;
  using G = GateUpLayout;
  std::vector<MoECase> v;
  // Real per-expert shapes of the SPEC §5 presets with few experts. The scalar reference
  // costs ~3·H·I multiply-adds per (token, slot): a kimi-k2/deepseek-v3 slot is 44 M, a
  // gpt-oss-120b slot 25 M, a qwen3-235b slot 19 M, a qwen3-30b slot 4.7 M. Real shapes get
  // the small T (1, 7, 64 for qwen3-30b); T = 300 runs on shapes scaled down by 2-4x in H
  // and I, so that the reference of the whole table stays under ~60 s on one core (~35 s
  // measured). Expert counts are small because generating and quantizing fp32 weights costs
  // ~10 ns per weight: the table's problems take ~20 s to build, mostly the 7168x2048 ones.
  v.push_back({.name = "kimi_k2_T1", .H = 7168, .I = 2048, .E = 10, .k = 8, .T = 1, .seed = 11});
  v.push_back({.name = "deepseek_v3_w4a4_T7", .H = 7168, .I = 2048, .E = 10, .k = 8, .T = 7, .aq = AQ::nvfp4,
               .seed = 12});
  v.push_back({.name = "qwen3_235b_T7", .H = 4096, .I = 1536, .E = 12, .k = 8, .T = 7, .routing = Routing::skewed,
               .seed = 13});
  v.push_back({.name = "qwen3_30b_T64", .H = 2048, .I = 768, .E = 32, .k = 8, .T = 64, .seed = 14});
  v.push_back({.name = "qwen3_30b_w4a4_T7", .H = 2048, .I = 768, .E = 32, .k = 8, .T = 7, .aq = AQ::nvfp4,
               .seed = 15});
  v.push_back({.name = "gpt_oss_120b_T7", .H = 2880, .I = 2880, .E = 8, .k = 4, .T = 7, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .gate_up = G::interleaved, .bias = true, .seed = 16});
  v.push_back({.name = "gpt_oss_120b_T1", .H = 2880, .I = 2880, .E = 8, .k = 4, .T = 1, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .gate_up = G::interleaved, .bias = true, .seed = 17});
  // scaled-down shapes for many tokens (H, I still multiples of 128, except gpt-oss: 64)
  v.push_back({.name = "kimi_k2_quarter_w4a4_T64", .H = 1792, .I = 512, .E = 32, .k = 8, .T = 64,
               .aq = AQ::nvfp4, .routing = Routing::skewed, .seed = 18});
  v.push_back({.name = "qwen3_30b_half_T300", .H = 1024, .I = 384, .E = 32, .k = 8, .T = 300, .seed = 19});
  v.push_back({.name = "gpt_oss_quarter_T300", .H = 704, .I = 704, .E = 16, .k = 4, .T = 300, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .gate_up = G::interleaved, .bias = true, .seed = 20});

  // Irregular cases on small shapes.
  const int64_t h = 512, i = 256;
  v.push_back({.name = "experts_with_zero_tokens", .H = h, .I = i, .E = 64, .k = 2, .T = 7,
               .routing = Routing::skewed, .seed = 21});
  v.push_back({.name = "all_tokens_one_expert_k1", .H = h, .I = i, .E = 16, .k = 1, .T = 67,
               .routing = Routing::one_expert, .seed = 22});
  v.push_back({.name = "one_hot_expert_k4_w4a4", .H = h, .I = i, .E = 16, .k = 4, .T = 300, .aq = AQ::nvfp4,
               .routing = Routing::one_expert, .seed = 23});
  v.push_back({.name = "odd_T67_w4a4", .H = h, .I = i, .E = 16, .k = 4, .T = 67, .aq = AQ::nvfp4, .seed = 24});
  // W4A4 with ~75 rows per expert under uniform routing: the wgmma GEMMs (sm90, the default
  // path) take it, staged through bf16
  v.push_back({.name = "w4a4_T300_prefill", .H = 256, .I = 256, .E = 8, .k = 2, .T = 300, .aq = AQ::nvfp4,
               .seed = 43});
  v.push_back({.name = "ep_map_contiguous", .H = h, .I = i, .E = 32, .k = 4, .T = 67, .E_local = 12, .seed = 26});
  v.push_back({.name = "ep_map_shuffled_w4a4", .H = h, .I = i, .E = 32, .k = 4, .T = 67, .aq = AQ::nvfp4,
               .E_local = 9, .seed = 27});
  v.push_back({.name = "ep_map_mxfp4_bias", .H = h, .I = i, .E = 16, .k = 4, .T = 33, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .gate_up = G::interleaved, .bias = true, .E_local = 5, .seed = 29});
  v.push_back({.name = "top1_router_weight_on_input", .H = h, .I = i, .E = 16, .k = 1, .T = 33,
               .router_weight_on_input = true, .seed = 30});
  v.push_back({.name = "top1_router_weight_on_input_w4a4", .H = h, .I = i, .E = 16, .k = 1, .T = 33,
               .aq = AQ::nvfp4, .router_weight_on_input = true, .seed = 31});
  v.push_back({.name = "accumulate", .H = h, .I = i, .E = 16, .k = 2, .T = 7, .accumulate = true, .seed = 32});
  v.push_back({.name = "accumulate_mxfp4", .H = h, .I = i, .E = 16, .k = 4, .T = 64, .wf = WF::mxfp4,
               .accumulate = true, .seed = 33});
  v.push_back({.name = "invalid_ids", .H = h, .I = i, .E = 16, .k = 4, .T = 64, .routing = Routing::with_invalid,
               .seed = 34});
  v.push_back({.name = "invalid_ids_w4a4", .H = h, .I = i, .E = 16, .k = 4, .T = 7, .aq = AQ::nvfp4,
               .routing = Routing::with_invalid, .seed = 35});
  // One token (the decode GEMM 1 maps its CTAs to the top-k slots itself): experts not local,
  // every id -1, an expert named twice, the router weight on the input. I = 512: GEMM 2's K of 8
  // k-blocks splits, so the decode kernels run both GEMMs (at 4 the fast path runs GEMM 2).
  const int64_t i1 = 512;
  v.push_back({.name = "t1_ep_map_w4a4", .H = h, .I = i1, .E = 32, .k = 8, .T = 1, .aq = AQ::nvfp4, .E_local = 9,
               .seed = 44});
  v.push_back({.name = "t1_invalid_ids", .H = h, .I = i1, .E = 16, .k = 4, .T = 1, .routing = Routing::with_invalid,
               .seed = 45});
  v.push_back({.name = "t1_repeated_id_mxfp4", .H = h, .I = i1, .E = 16, .k = 4, .T = 1, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .bias = true, .routing = Routing::repeated, .seed = 46});
  v.push_back({.name = "t1_top1_router_weight_on_input_w4a4", .H = h, .I = i1, .E = 16, .k = 1, .T = 1,
               .aq = AQ::nvfp4, .router_weight_on_input = true, .seed = 47});
  // every format and layout combination
  v.push_back({.name = "mxfp4_silu_concat", .H = h, .I = i, .E = 16, .k = 4, .T = 67, .wf = WF::mxfp4, .seed = 36});
  v.push_back({.name = "mxfp4_silu_bias", .H = h, .I = i, .E = 16, .k = 4, .T = 7, .wf = WF::mxfp4, .bias = true,
               .seed = 37});
  v.push_back({.name = "mxfp4_swiglu_concat_nobias", .H = h, .I = i, .E = 16, .k = 4, .T = 7, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .seed = 38});
  v.push_back({.name = "nvfp4_interleaved_swiglu", .H = h, .I = i, .E = 16, .k = 4, .T = 7,
               .act = A::swiglu_oai, .gate_up = G::interleaved, .seed = 39});
  v.push_back({.name = "nvfp4_w4a4_interleaved", .H = h, .I = i, .E = 16, .k = 4, .T = 7, .aq = AQ::nvfp4,
               .gate_up = G::interleaved, .seed = 40});
  // shapes that are no multiple of any tile: H = 21·16, I = 5·16 (NVFP4), H = 9·32, I = 3·32 (MXFP4)
  v.push_back({.name = "odd_shape_nvfp4", .H = 336, .I = 80, .E = 8, .k = 2, .T = 13, .seed = 41});
  v.push_back({.name = "odd_shape_mxfp4", .H = 288, .I = 96, .E = 8, .k = 2, .T = 13, .wf = WF::mxfp4,
               .act = A::swiglu_oai, .bias = true, .seed = 42});

  if (include_full_size) {
    // Whole layers, codes drawn directly: kimi-k2 holds ~9.5 GB of codes and scales on the
    // host, gpt-oss-120b ~2.8 GB (its interleaved checkpoint copy included).
    for (int64_t T : {int64_t(1), int64_t(128)}) {
      const std::string t = std::to_string(T);
      v.push_back({.name = "full_kimi_k2_T" + t, .H = 7168, .I = 2048, .E = 384, .k = 8, .T = T,
                   .aq = T == 1 ? AQ::none : AQ::nvfp4, .seed = 100 + uint64_t(T), .random_codes = true});
      v.push_back({.name = "full_gpt_oss_120b_T" + t, .H = 2880, .I = 2880, .E = 128, .k = 4, .T = T,
                   .wf = WF::mxfp4, .act = A::swiglu_oai, .gate_up = G::interleaved, .bias = true,
                   .seed = 200 + uint64_t(T), .random_codes = true});
    }
  }
  return v;
}

}  // namespace fp4moe::testing
