// load_moe_layer on checkpoints written here: a gpt-oss MXFP4 layer with biases
// (interleaved gate/up, one tensor per layer), a ModelOpt NVFP4 layer in DeepSeek naming
// (per-expert tensors, scalar scales of shape [] and [1], input scales, correction bias),
// compared with the same weights built in memory (bytes, and the reference backend's
// output bit for bit); and the errors for missing tensors, inconsistent shapes and bad
// configs, which must name the file and the tensor or key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "fp4moe/checkpoint.hpp"
#include "fp4moe/format.h"

#include "checkpoint_test_util.hpp"

namespace fp4moe {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using testing::bytes_of;
using testing::expect_error;
using testing::TmpDir;
using testing::write_file;
using testing::write_st;
using T = testing::StTensor;

// Writes ts into dir, in one file or two shards with an index.
void write_ckpt(const std::string& dir, const json& config, const std::vector<T>& ts, bool sharded) {
  write_file(dir + "/config.json", config.dump());
  if (!sharded) return write_st(dir + "/model.safetensors", ts);
  json wm;
  std::vector<T> a, b;
  for (size_t i = 0; i < ts.size(); ++i) {
    (i % 2 ? b : a).push_back(ts[i]);
    wm[ts[i].name] = i % 2 ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  write_st(dir + "/model-00001-of-00002.safetensors", a);
  write_st(dir + "/model-00002-of-00002.safetensors", b);
  write_file(dir + "/model.safetensors.index.json", json{{"weight_map", wm}}.dump());
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n, int lo = 0, int hi = 255) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(d(rng));
  return v;
}
std::vector<uint8_t> random_bf16(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint8_t> v(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = bf16_from_f32(d(rng));
    std::memcpy(v.data() + 2 * i, &h, 2);
  }
  return v;
}
// e4m3 block scales of moderate size (codes 0x30..0x48: 0.5 .. 4), never NaN
std::vector<uint8_t> random_e4m3(std::mt19937& rng, size_t n) { return random_bytes(rng, n, 0x30, 0x48); }
std::vector<uint8_t> f32_bytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

std::vector<float> run_ref(const LayerDesc& d, const CheckpointWeights& w, std::mt19937 rng, int64_t T) {
  std::vector<uint16_t> x(size_t(T * d.hidden));
  std::normal_distribution<float> nd;
  for (auto& v : x) v = bf16_from_f32(nd(rng));
  std::vector<int32_t> ids(size_t(T * d.top_k));
  std::vector<float> tw(ids.size());
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> perm(size_t(d.num_experts));
    for (int64_t e = 0; e < d.num_experts; ++e) perm[size_t(e)] = int32_t(e);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t j = 0; j < d.top_k; ++j) {
      ids[size_t(t * d.top_k + j)] = perm[size_t(j)];
      tw[size_t(t * d.top_k + j)] = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    }
  }
  return testing::run_reference(d, w, x, ids, tw, T);
}

void expect_same_output(const LayerDesc& got_desc, const CheckpointWeights& got, const LayerDesc& want_desc,
                        const CheckpointWeights& want) {
  const std::mt19937 rng(std::random_device{}());
  const auto a = run_ref(got_desc, got, rng, 9), b = run_ref(want_desc, want, rng, 9);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  double n = 0;
  for (float v : b) n += double(v) * v;
  EXPECT_GT(n, 0.0);
  EXPECT_TRUE(std::isfinite(n));
}

// ---------------------------------------------------------------------------
// gpt-oss MXFP4
// ---------------------------------------------------------------------------
struct GptOss {
  int64_t H = 64, I = 96, E = 4, k = 2;
  std::vector<uint8_t> w13, w13s, w2, w2s, b13, b2, rw, rb;  // checkpoint bytes
  json config() const {
    return {{"model_type", "gpt_oss"}, {"hidden_size", H}, {"intermediate_size", I}, {"num_local_experts", E},
            {"experts_per_token", k}, {"num_experts_per_tok", k}, {"swiglu_limit", 7.0}, {"hidden_act", "silu"},
            {"num_hidden_layers", 2}, {"quantization_config", {{"quant_method", "mxfp4"}}}};
  }
  std::vector<T> tensors(int layer) const {
    const std::string P = "model.layers." + std::to_string(layer) + ".mlp.";
    return {{P + "router.weight", "BF16", {E, H}, rw},
            {P + "router.bias", "BF16", {E}, rb},
            {P + "experts.gate_up_proj_blocks", "U8", {E, 2 * I, H / 32, 16}, w13},
            {P + "experts.gate_up_proj_scales", "U8", {E, 2 * I, H / 32}, w13s},
            {P + "experts.gate_up_proj_bias", "BF16", {E, 2 * I}, b13},
            {P + "experts.down_proj_blocks", "U8", {E, H, I / 32, 16}, w2},
            {P + "experts.down_proj_scales", "U8", {E, H, I / 32}, w2s},
            {P + "experts.down_proj_bias", "BF16", {E, H}, b2}};
  }
  // The SPEC §3 weights and layer, built here.
  CheckpointWeights weights() const {
    CheckpointWeights w;
    w.w13 = TensorView::of(w13.data(), DType::u8, {E, 2 * I, H / 2});
    w.w13_scale = TensorView::of(w13s.data(), DType::e8m0, {E, 2 * I, H / 32});
    w.w2 = TensorView::of(w2.data(), DType::u8, {E, H, I / 2});
    w.w2_scale = TensorView::of(w2s.data(), DType::e8m0, {E, H, I / 32});
    w.w13_bias = TensorView::of(b13.data(), DType::bf16, {E, 2 * I});
    w.w2_bias = TensorView::of(b2.data(), DType::bf16, {E, H});
    return w;
  }
  LayerDesc desc() const {
    LayerDesc d;
    d.hidden = H, d.intermediate = I, d.num_experts = E, d.top_k = k;
    d.weight_format = WeightFormat::mxfp4;
    d.activation = Activation::swiglu_oai;
    d.gate_up = GateUpLayout::interleaved;
    return d;
  }
};

GptOss make_gpt_oss(std::mt19937& rng) {
  GptOss g;
  const auto E = size_t(g.E), H = size_t(g.H), I = size_t(g.I);
  g.w13 = random_bytes(rng, E * 2 * I * H / 2);
  g.w13s = random_bytes(rng, E * 2 * I * H / 32, 120, 128);  // 2^-7 .. 2^1
  g.w2 = random_bytes(rng, E * H * I / 2);
  g.w2s = random_bytes(rng, E * H * I / 32, 118, 126);
  g.b13 = random_bf16(rng, E * 2 * I, 0.5f);
  g.b2 = random_bf16(rng, E * H, 0.5f);
  g.rw = random_bf16(rng, E * H, 0.1f);
  g.rb = random_bf16(rng, E, 0.1f);
  return g;
}

void check_gpt_oss(bool sharded) {
  std::mt19937 rng(std::random_device{}());
  const GptOss g = make_gpt_oss(rng);
  TmpDir dir;
  std::vector<T> ts = g.tensors(1);
  const GptOss other = make_gpt_oss(rng);  // layer 0 holds different weights
  for (auto& t : other.tensors(0)) ts.push_back(t);
  write_ckpt(dir.path.string(), g.config(), ts, sharded);

  const Checkpoint ck = Checkpoint::open(dir.path.string());
  const LoadedLayer L = load_moe_layer(ck, 1);
  EXPECT_EQ(L.model_type, "gpt_oss");
  EXPECT_EQ(L.desc.hidden, g.H);
  EXPECT_EQ(L.desc.intermediate, g.I);
  EXPECT_EQ(L.desc.num_experts, g.E);
  EXPECT_EQ(L.desc.top_k, g.k);
  EXPECT_EQ(L.desc.weight_format, WeightFormat::mxfp4);
  EXPECT_EQ(L.desc.activation, Activation::swiglu_oai);
  EXPECT_EQ(L.desc.gate_up, GateUpLayout::interleaved);
  EXPECT_EQ(L.desc.routing.method, RoutingMethod::softmax);
  EXPECT_TRUE(L.desc.routing.renormalize);
  EXPECT_EQ(L.desc.swiglu_limit, 7.0f);
  EXPECT_EQ(bytes_of(L.weights.w13), g.w13);
  EXPECT_EQ(bytes_of(L.weights.w13_scale), g.w13s);
  EXPECT_EQ(bytes_of(L.weights.w2), g.w2);
  EXPECT_EQ(bytes_of(L.weights.w2_scale), g.w2s);
  EXPECT_EQ(L.weights.w13.shape[2], g.H / 2);
  EXPECT_EQ(L.weights.w13_scale.dtype, DType::e8m0);
  EXPECT_FALSE(L.weights.w13_scale_2.present());
  EXPECT_EQ(L.router_weight.dtype, DType::bf16);
  EXPECT_EQ(bytes_of(L.router_weight), g.rw);
  ASSERT_TRUE(L.router_bias.present());
  for (int64_t e = 0; e < g.E; ++e) {
    uint16_t h;
    std::memcpy(&h, g.rb.data() + 2 * e, 2);
    EXPECT_EQ(static_cast<const float*>(L.router_bias.data)[e], bf16_to_f32(h));
  }
  EXPECT_FALSE(L.correction_bias.present());
  expect_same_output(L.desc, L.weights, g.desc(), g.weights());
}

TEST(Loaders, GptOssMxfp4WithBiases) { check_gpt_oss(false); }
TEST(Loaders, GptOssMxfp4Sharded) { check_gpt_oss(true); }

// ---------------------------------------------------------------------------
// ModelOpt NVFP4, DeepSeek naming
// ---------------------------------------------------------------------------
struct ModelOpt {
  int64_t H = 64, I = 32, E = 8, k = 3;
  std::vector<uint8_t> w13, w13s, w2, w2s;  // SPEC §3 layout
  std::vector<float> dq13, dq2, in_g, in_u, in_d, corr;
  std::vector<uint8_t> rw;
  json config() const {
    return {{"model_type", "deepseek_v3"}, {"hidden_size", H}, {"moe_intermediate_size", I},
            {"intermediate_size", 4 * H}, {"n_routed_experts", E}, {"num_experts_per_tok", k},
            {"n_group", 4}, {"topk_group", 2}, {"scoring_func", "sigmoid"}, {"routed_scaling_factor", 2.5},
            {"norm_topk_prob", true}, {"first_k_dense_replace", 1}, {"num_hidden_layers", 3},
            {"hidden_act", "silu"}};
  }
  json quant_config() const {
    return {{"producer", {{"name", "modelopt"}, {"version", "0.29"}}},
            {"quantization", {{"quant_algo", "NVFP4"}, {"group_size", 16}, {"exclude_modules", {"lm_head"}}}}};
  }
  std::vector<T> tensors(int layer) const {
    const std::string P = "model.layers." + std::to_string(layer) + ".mlp.";
    std::vector<T> ts;
    ts.push_back({P + "gate.weight", "BF16", {E, H}, rw});
    ts.push_back({P + "gate.e_score_correction_bias", "F32", {E}, std::vector<uint8_t>(
        reinterpret_cast<const uint8_t*>(corr.data()), reinterpret_cast<const uint8_t*>(corr.data() + E))});
    for (int64_t e = 0; e < E; ++e) {
      const std::string X = P + "experts." + std::to_string(e) + ".";
      // scalars as [] (ModelOpt) for even experts, [1] for odd ones
      const std::vector<int64_t> sc = e % 2 ? std::vector<int64_t>{1} : std::vector<int64_t>{};
      auto lin = [&](const std::string& name, const uint8_t* d, const uint8_t* s, int64_t R, int64_t K, float dq,
                     float in) {
        ts.push_back({X + name + ".weight", "U8", {R, K / 2}, {d, d + R * K / 2}});
        ts.push_back({X + name + ".weight_scale", "F8_E4M3", {R, K / 16}, {s, s + R * K / 16}});
        ts.push_back({X + name + ".weight_scale_2", "F32", sc, f32_bytes(dq)});
        ts.push_back({X + name + ".input_scale", "F32", sc, f32_bytes(in)});
      };
      const uint8_t* g = w13.data() + e * 2 * I * H / 2;
      const uint8_t* gs = w13s.data() + e * 2 * I * H / 16;
      lin("gate_proj", g, gs, I, H, dq13[size_t(e)], in_g[size_t(e)]);
      lin("up_proj", g + I * H / 2, gs + I * H / 16, I, H, dq13[size_t(e)], in_u[size_t(e)]);
      lin("down_proj", w2.data() + e * H * I / 2, w2s.data() + e * H * I / 16, H, I, dq2[size_t(e)], in_d[size_t(e)]);
    }
    return ts;
  }
};

ModelOpt make_modelopt(std::mt19937& rng) {
  ModelOpt m;
  const auto E = size_t(m.E), H = size_t(m.H), I = size_t(m.I);
  m.w13 = random_bytes(rng, E * 2 * I * H / 2);
  m.w13s = random_e4m3(rng, E * 2 * I * H / 16);
  m.w2 = random_bytes(rng, E * H * I / 2);
  m.w2s = random_e4m3(rng, E * H * I / 16);
  std::uniform_real_distribution<float> u(0.001f, 0.01f);
  for (size_t e = 0; e < E; ++e) {
    m.dq13.push_back(u(rng)), m.dq2.push_back(u(rng));
    m.in_g.push_back(u(rng)), m.in_u.push_back(u(rng)), m.in_d.push_back(u(rng));
    m.corr.push_back(u(rng));
  }
  m.rw = random_bf16(rng, E * H, 0.1f);
  return m;
}

struct ModelOptDir {
  TmpDir dir;
  ModelOpt m;
  std::vector<T> ts;
  ModelOptDir() {
    std::mt19937 rng(std::random_device{}());
    m = make_modelopt(rng);
    ts = m.tensors(1);
  }
  std::string write(const json& config, bool sharded = false, bool hf_quant = true) {
    write_ckpt(dir.path.string(), config, ts, sharded);
    if (hf_quant) write_file(dir / "hf_quant_config.json", m.quant_config().dump());
    return dir.path.string();
  }
  T& tensor(const std::string& name) {
    for (auto& t : ts)
      if (t.name == name) return t;
    throw std::runtime_error("test: no tensor " + name);
  }
  void drop(const std::string& name) {
    ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const T& t) { return t.name == name; }), ts.end());
  }
};

TEST(Loaders, ModelOptNvfp4DeepSeek) {
  for (bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "sharded" : "one file");
    ModelOptDir d;
    const ModelOpt& m = d.m;
    const Checkpoint ck = Checkpoint::open(d.write(m.config(), sharded));
    const LoadedLayer L = load_moe_layer(ck, 1);
    EXPECT_EQ(L.model_type, "deepseek_v3");
    EXPECT_EQ(L.desc.hidden, m.H);
    EXPECT_EQ(L.desc.intermediate, m.I);  // moe_intermediate_size, not intermediate_size
    EXPECT_EQ(L.desc.num_experts, m.E);
    EXPECT_EQ(L.desc.top_k, m.k);
    EXPECT_EQ(L.desc.weight_format, WeightFormat::nvfp4);
    EXPECT_EQ(L.desc.activation, Activation::silu);
    EXPECT_EQ(L.desc.routing.method, RoutingMethod::sigmoid_grouped);
    EXPECT_EQ(L.desc.routing.n_group, 4);
    EXPECT_EQ(L.desc.routing.topk_group, 2);
    EXPECT_EQ(L.desc.routing.routed_scaling_factor, 2.5f);
    EXPECT_EQ(bytes_of(L.weights.w13), m.w13);
    EXPECT_EQ(bytes_of(L.weights.w13_scale), m.w13s);
    EXPECT_EQ(L.weights.w13_scale.dtype, DType::e4m3);
    EXPECT_EQ(bytes_of(L.weights.w2), m.w2);
    EXPECT_EQ(bytes_of(L.weights.w2_scale), m.w2s);
    for (int64_t e = 0; e < m.E; ++e) {
      const auto i = size_t(e);
      EXPECT_EQ(static_cast<const float*>(L.weights.w13_scale_2.data)[e], m.dq13[i]);
      EXPECT_EQ(static_cast<const float*>(L.weights.w2_scale_2.data)[e], m.dq2[i]);
      EXPECT_EQ(static_cast<const float*>(L.weights.w13_input_scale.data)[e], std::max(m.in_g[i], m.in_u[i]));
      EXPECT_EQ(static_cast<const float*>(L.weights.w2_input_scale.data)[e], m.in_d[i]);
      EXPECT_EQ(static_cast<const float*>(L.correction_bias.data)[e], m.corr[i]);
    }
    EXPECT_EQ(bytes_of(L.router_weight), m.rw);
    EXPECT_FALSE(L.router_bias.present());

    // the same weights built in memory give the same output, W4A16 and W4A4
    CheckpointWeights w;
    std::vector<float> in13, in2;
    for (size_t e = 0; e < size_t(m.E); ++e) in13.push_back(std::max(m.in_g[e], m.in_u[e])), in2.push_back(m.in_d[e]);
    w.w13 = TensorView::of(m.w13.data(), DType::u8, {m.E, 2 * m.I, m.H / 2});
    w.w13_scale = TensorView::of(m.w13s.data(), DType::e4m3, {m.E, 2 * m.I, m.H / 16});
    w.w13_scale_2 = TensorView::of(m.dq13.data(), DType::f32, {m.E});
    w.w2 = TensorView::of(m.w2.data(), DType::u8, {m.E, m.H, m.I / 2});
    w.w2_scale = TensorView::of(m.w2s.data(), DType::e4m3, {m.E, m.H, m.I / 16});
    w.w2_scale_2 = TensorView::of(m.dq2.data(), DType::f32, {m.E});
    w.w13_input_scale = TensorView::of(in13.data(), DType::f32, {m.E});
    w.w2_input_scale = TensorView::of(in2.data(), DType::f32, {m.E});
    LayerDesc want;
    want.hidden = m.H, want.intermediate = m.I, want.num_experts = m.E, want.top_k = m.k;
    expect_same_output(L.desc, L.weights, want, w);
    LayerDesc got4 = L.desc;
    got4.act_quant = want.act_quant = ActQuant::nvfp4;
    expect_same_output(got4, L.weights, want, w);
  }
}

TEST(Loaders, QuantizationConfigInConfigJson) {
  ModelOptDir d;
  json c = d.m.config();
  c["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}};
  const LoadedLayer L = load_moe_layer(Checkpoint::open(d.write(c, false, false)), 1);
  EXPECT_EQ(L.desc.weight_format, WeightFormat::nvfp4);
}

TEST(Loaders, GateUpGlobalScalesMustMatch) {
  ModelOptDir d;
  d.tensor("model.layers.1.mlp.experts.5.up_proj.weight_scale_2").bytes = f32_bytes(d.m.dq13[5] * 2);
  const std::string dir = d.write(d.m.config());
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); },
               {"model.safetensors", "model.layers.1.mlp.experts.5.gate_proj.weight_scale_2",
                "gate/up weight_scale_2 differ", "expert 5", "re-export"});
}

TEST(Loaders, MissingTensorsNameThem) {
  for (const std::string name : {"model.layers.1.mlp.experts.6.down_proj.weight_scale",
                                 "model.layers.1.mlp.experts.0.up_proj.weight", "model.layers.1.mlp.gate.weight",
                                 "model.layers.1.mlp.experts.3.gate_proj.input_scale"}) {
    ModelOptDir d;
    d.drop(name);
    const std::string dir = d.write(d.m.config(), true);
    expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); }, {name});
  }
}

TEST(Loaders, InconsistentExpertShapesNameFileAndTensor) {
  ModelOptDir d;
  T& t = d.tensor("model.layers.1.mlp.experts.3.up_proj.weight");
  t.shape = {d.m.I - 1, d.m.H / 2};
  t.bytes.resize(size_t((d.m.I - 1) * d.m.H / 2));
  const std::string dir = d.write(d.m.config());
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); },
               {dir + "/model.safetensors", "model.layers.1.mlp.experts.3.up_proj.weight", "[31, 32]", "[32, 32]"});

  ModelOptDir d2;
  d2.tensor("model.layers.1.mlp.experts.2.down_proj.weight_scale").dtype = "U16";
  d2.tensor("model.layers.1.mlp.experts.2.down_proj.weight_scale").shape = {d2.m.H, d2.m.I / 32};
  const std::string dir2 = d2.write(d2.m.config());
  expect_error([&] { load_moe_layer(Checkpoint::open(dir2), 1); },
               {"model.layers.1.mlp.experts.2.down_proj.weight_scale", "U16", "F8_E4M3"});
}

TEST(Loaders, BadConfigsNameFileAndKey) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
    int layer = 1;
  };
  const std::vector<Case> cases = {
      {[](json& c) { c.erase("hidden_size"); }, {"config.json", "hidden_size", "missing"}},
      {[](json& c) { c["n_routed_experts"] = "8"; }, {"config.json", "n_routed_experts", "\"8\""}},
      {[](json& c) { c.erase("n_routed_experts"); }, {"config.json", "n_routed_experts or num_experts"}},
      {[](json& c) { c["num_experts_per_tok"] = 9; }, {"num_experts_per_tok", "9"}},
      {[](json& c) { c["scoring_func"] = "tanh"; }, {"config.json", "scoring_func", "tanh"}},
      {[](json& c) { c["n_group"] = 3; }, {"config.json", "n_group"}},
      {[](json& c) { c["hidden_act"] = "gelu"; }, {"config.json", "hidden_act", "gelu"}},
      {[](json& c) { c["routed_scaling_factor"] = -1; }, {"routed_scaling_factor", "-1"}},
      {[](json&) {}, {"layer", "dense", "first_k_dense_replace"}, 0},
      {[](json&) {}, {"layer", "num_hidden_layers"}, 3},
      {[](json&) {}, {"layer", "-1"}, -1},
  };
  for (const auto& c : cases) {
    ModelOptDir d;
    json cfg = d.m.config();
    c.edit(cfg);
    const std::string dir = d.write(cfg);
    SCOPED_TRACE(cfg.dump());
    expect_error([&] { load_moe_layer(Checkpoint::open(dir), c.layer); },
                 std::initializer_list<std::string>{});  // throws at all
    for (const auto& p : c.parts)
      expect_error([&] { load_moe_layer(Checkpoint::open(dir), c.layer); }, {p});
  }
  // no quantization config at all, and an algorithm fp4moe does not run
  ModelOptDir d;
  const std::string dir = d.write(d.m.config(), false, false);
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); }, {"hf_quant_config.json", "quantization_config"});
  write_file(dir + "/hf_quant_config.json", R"({"quantization": {"quant_algo": "FP8"}})");
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); }, {"hf_quant_config.json", "quant_algo", "FP8"});
  write_file(dir + "/hf_quant_config.json", "{not json");
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); }, {"hf_quant_config.json", "JSON"});
  write_file(dir + "/config.json", "[]");
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); }, {"config.json", "object"});
  fs::remove(dir + "/config.json");
  expect_error([&] { load_moe_layer(Checkpoint::open(dir), 1); }, {"config.json", "not found"});
}

}  // namespace
}  // namespace fp4moe
