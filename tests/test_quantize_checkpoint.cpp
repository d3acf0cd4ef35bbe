// quantize_checkpoint (the library side of `fp4moe quantize`): bf16 checkpoints written
// here (Qwen3-MoE, DeepSeek and Mixtral naming, one file or sharded) are quantized, loaded
// back with load_moe_layer and compared with an independent in-memory quantization (the
// SPEC §2 formulas written out here with format.h's scalar codecs): bit-exact weights and
// bit-exact reference-backend output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "fp4moe/checkpoint.hpp"
#include "fp4moe/format.h"
#include "fp4moe/quantize_checkpoint.hpp"

#include "checkpoint_test_util.hpp"

namespace fp4moe {
namespace {

namespace fs = std::filesystem;

using testing::bytes_of;
using testing::expect_error;
using testing::run_reference;
using testing::TmpDir;
using testing::write_file;
using testing::write_st;
using T = testing::StTensor;

// A bf16 model: float values kept so the oracle quantizes exactly what was written.
struct Model {
  std::map<std::string, std::vector<float>> values;  // name -> bf16-exact values
  std::vector<T> tensors;                             // in file order
  std::mt19937 rng{std::random_device{}()};

  void bf16(const std::string& name, int64_t rows, int64_t cols, float scale) {
    std::normal_distribution<float> n(0.0f, scale);
    std::vector<float> v(size_t(rows * cols));
    T t{name, "BF16", cols ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows}, {}};
    if (!cols) v.resize(size_t(rows));
    t.bytes.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = bf16_from_f32(n(rng));
      v[i] = bf16_to_f32(h);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
    values[name] = v;
    tensors.push_back(std::move(t));
  }
  void f32(const std::string& name, int64_t n) {
    std::normal_distribution<float> d(0.0f, 0.1f);
    T t{name, "F32", {n}, std::vector<uint8_t>(size_t(n) * 4)};
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    values[name] = v;
    tensors.push_back(std::move(t));
  }
};

enum class Naming { qwen3, deepseek, mixtral };

struct Spec {
  Naming naming = Naming::qwen3;
  int64_t H = 64, I = 32, E = 4, k = 2;
  int layers = 2;
  int first_moe = 0;   // DeepSeek: layers below are dense
  bool sharded = false;
};

// Writes a bf16 checkpoint of `s` into dir; returns the model (values by name).
Model write_model(const Spec& s, const std::string& dir) {
  Model m;
  nlohmann::json cfg = {{"hidden_size", s.H}, {"num_experts_per_tok", s.k}, {"num_hidden_layers", s.layers},
                        {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"}};
  std::string moe = "mlp", g = "gate_proj", u = "up_proj", d = "down_proj";
  switch (s.naming) {
    case Naming::qwen3:
      cfg.update({{"model_type", "qwen3_moe"}, {"moe_intermediate_size", s.I}, {"intermediate_size", 4 * s.H},
                  {"num_experts", s.E}, {"norm_topk_prob", true}});
      break;
    case Naming::deepseek:
      cfg.update({{"model_type", "deepseek_v3"}, {"moe_intermediate_size", s.I}, {"intermediate_size", 4 * s.H},
                  {"n_routed_experts", s.E}, {"n_group", 2}, {"topk_group", 1}, {"scoring_func", "sigmoid"},
                  {"routed_scaling_factor", 2.5}, {"norm_topk_prob", true}, {"first_k_dense_replace", s.first_moe},
                  {"topk_method", "noaux_tc"}});
      break;
    case Naming::mixtral:
      cfg.update({{"model_type", "mixtral"}, {"intermediate_size", s.I}, {"num_local_experts", s.E}});
      moe = "block_sparse_moe", g = "w1", u = "w3", d = "w2";
      break;
  }
  write_file(dir + "/config.json", cfg.dump(2));
  write_file(dir + "/tokenizer.json", "{\"not\": \"a tensor\"}");
  m.bf16("model.embed_tokens.weight", 16, s.H, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    m.bf16(L + "self_attn.q_proj.weight", s.H, s.H, 0.05f);
    m.bf16(L + "input_layernorm.weight", s.H, 0, 1.0f);
    if (l < s.first_moe) {
      m.bf16(L + "mlp.gate_proj.weight", 2 * s.H, s.H, 0.05f);
      continue;
    }
    m.bf16(L + moe + ".gate.weight", s.E, s.H, 0.1f);
    if (s.naming == Naming::deepseek) {
      m.f32(L + "mlp.gate.e_score_correction_bias", s.E);
      m.bf16(L + "mlp.shared_experts.gate_proj.weight", s.I, s.H, 0.05f);
    }
    for (int64_t e = 0; e < s.E; ++e) {
      const std::string P = L + moe + ".experts." + std::to_string(e) + ".";
      // experts of different magnitudes (so each gets its own global scale), up larger
      // than gate for some (so the shared amax is not the gate's)
      const float mag = 0.02f * float(1 + e);
      m.bf16(P + g + ".weight", s.I, s.H, e % 2 ? mag : 2 * mag);
      m.bf16(P + u + ".weight", s.I, s.H, e % 2 ? 3 * mag : mag);
      m.bf16(P + d + ".weight", s.H, s.I, mag);
    }
  }
  if (!s.sharded) {
    write_st(dir + "/model.safetensors", m.tensors);
    return m;
  }
  // Two shards, split mid-expert so that some gate and up live in different files.
  const size_t half = m.tensors.size() / 2 + 1;
  std::vector<T> a(m.tensors.begin(), m.tensors.begin() + long(half)), b(m.tensors.begin() + long(half), m.tensors.end());
  write_st(dir + "/model-00001-of-00002.safetensors", a);
  write_st(dir + "/model-00002-of-00002.safetensors", b);
  nlohmann::json wm;
  for (const auto& t : a) wm[t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) wm[t.name] = "model-00002-of-00002.safetensors";
  write_file(dir + "/model.safetensors.index.json", nlohmann::json{{"weight_map", wm}}.dump());
  return m;
}

// ---------------------------------------------------------------------------
// The oracle: SPEC §2 written out with format.h's scalar codecs.
// ---------------------------------------------------------------------------
void oracle_nvfp4(const std::vector<float>& x, int64_t R, int64_t K, float gs, uint8_t* data, uint8_t* scale) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t b = 0; b < K / 16; ++b) {
      const float* v = x.data() + r * K + b * 16;
      float amax = 0;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(v[i]));
      const uint8_t s = e4m3_from_f32(gs * (amax * (1.0f / 6.0f)));
      const float inv = e4m3_to_f32(s) == 0.0f ? 0.0f : 1.0f / (e4m3_to_f32(s) * (1.0f / gs));
      scale[r * (K / 16) + b] = s;
      for (int i = 0; i < 16; i += 2)
        data[(r * K + b * 16 + i) / 2] =
            uint8_t(e2m1_from_f32(v[i] * inv) | (e2m1_from_f32(v[i + 1] * inv) << 4));
    }
}

void oracle_mxfp4(const std::vector<float>& x, int64_t R, int64_t K, uint8_t* data, uint8_t* scale) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* v = x.data() + r * K + b * 32;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
      const int e = amax == 0.0f ? -127 : std::clamp(int(std::floor(std::log2(amax))) - 2, -127, 127);
      scale[r * (K / 32) + b] = uint8_t(e + 127);
      const float p = std::ldexp(1.0f, e);
      for (int i = 0; i < 32; i += 2)
        data[(r * K + b * 32 + i) / 2] = uint8_t(e2m1_from_f32(v[i] / p) | (e2m1_from_f32(v[i + 1] / p) << 4));
    }
}

// One layer quantized in memory, SPEC §3 layout.
struct Expected {
  std::vector<uint8_t> w13, w13s, w2, w2s;
  std::vector<float> w13_dq, w2_dq;
  CheckpointWeights view(const Spec& s, WeightFormat f) const {
    const int64_t blk = f == WeightFormat::nvfp4 ? 16 : 32;
    const DType sd = f == WeightFormat::nvfp4 ? DType::e4m3 : DType::e8m0;
    CheckpointWeights w;
    w.w13 = TensorView::of(w13.data(), DType::u8, {s.E, 2 * s.I, s.H / 2});
    w.w13_scale = TensorView::of(w13s.data(), sd, {s.E, 2 * s.I, s.H / blk});
    w.w2 = TensorView::of(w2.data(), DType::u8, {s.E, s.H, s.I / 2});
    w.w2_scale = TensorView::of(w2s.data(), sd, {s.E, s.H, s.I / blk});
    if (f == WeightFormat::nvfp4) {
      w.w13_scale_2 = TensorView::of(w13_dq.data(), DType::f32, {s.E});
      w.w2_scale_2 = TensorView::of(w2_dq.data(), DType::f32, {s.E});
    }
    return w;
  }
};

Expected quantize_in_memory(const Model& m, const Spec& s, int layer, WeightFormat f) {
  const int64_t H = s.H, I = s.I, E = s.E, blk = f == WeightFormat::nvfp4 ? 16 : 32;
  const bool mx = s.naming == Naming::mixtral;
  const std::string P0 = "model.layers." + std::to_string(layer) + (mx ? ".block_sparse_moe" : ".mlp") + ".experts.";
  Expected x;
  x.w13.resize(size_t(E * 2 * I * H / 2));
  x.w13s.resize(size_t(E * 2 * I * H / blk));
  x.w2.resize(size_t(E * H * I / 2));
  x.w2s.resize(size_t(E * H * I / blk));
  for (int64_t e = 0; e < E; ++e) {
    const std::string P = P0 + std::to_string(e) + ".";
    const auto& g = m.values.at(P + (mx ? "w1" : "gate_proj") + ".weight");
    const auto& u = m.values.at(P + (mx ? "w3" : "up_proj") + ".weight");
    const auto& d = m.values.at(P + (mx ? "w2" : "down_proj") + ".weight");
    uint8_t* w13 = x.w13.data() + e * 2 * I * H / 2;
    uint8_t* w13s = x.w13s.data() + e * 2 * I * H / blk;
    uint8_t* w2 = x.w2.data() + e * H * I / 2;
    uint8_t* w2s = x.w2s.data() + e * H * I / blk;
    if (f == WeightFormat::nvfp4) {
      float a13 = 0, a2 = 0;
      for (float v : g) a13 = std::max(a13, std::fabs(v));
      for (float v : u) a13 = std::max(a13, std::fabs(v));
      for (float v : d) a2 = std::max(a2, std::fabs(v));
      const float dq13 = a13 / (6.0f * 448.0f), dq2 = a2 / (6.0f * 448.0f);
      x.w13_dq.push_back(dq13);
      x.w2_dq.push_back(dq2);
      oracle_nvfp4(g, I, H, 1.0f / dq13, w13, w13s);
      oracle_nvfp4(u, I, H, 1.0f / dq13, w13 + I * H / 2, w13s + I * H / 16);
      oracle_nvfp4(d, H, I, 1.0f / dq2, w2, w2s);
    } else {
      oracle_mxfp4(g, I, H, w13, w13s);
      oracle_mxfp4(u, I, H, w13 + I * H / 2, w13s + I * H / 32);
      oracle_mxfp4(d, H, I, w2, w2s);
    }
  }
  return x;
}

std::vector<float> floats_of(const TensorView& v) {
  std::vector<float> r(size_t(v.numel()));
  std::memcpy(r.data(), v.data, r.size() * 4);
  return r;
}

// quantize -> load -> run == quantize in memory -> run, bit for bit.
void check_round_trip(const Spec& s, WeightFormat f) {
  TmpDir in, out;
  const Model m = write_model(s, in.path.string());
  QuantizeOptions q;
  q.format = f;
  double last = -1;
  q.progress = [&](double done, double total) {
    EXPECT_GE(done, last);
    EXPECT_LE(done, total);
    last = done;
  };
  const QuantizeReport r = quantize_checkpoint(in.path.string(), out.path.string(), q);
  EXPECT_EQ(r.linears, 3 * s.E * (s.layers - s.first_moe));
  EXPECT_EQ(r.files.size(), s.sharded ? 2u : 1u);
  EXPECT_EQ(fs::exists(out / "model.safetensors.index.json"), s.sharded);
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));

  const Checkpoint ck = Checkpoint::open(out.path.string());
  // non-expert tensors are copied byte for byte
  for (const auto& t : m.tensors) {
    if (t.name.find(".experts.") != std::string::npos && t.name.find("shared_experts") == std::string::npos) continue;
    auto [file, info] = ck.find(t.name);
    const auto b = file->bytes(*info);
    ASSERT_EQ(std::vector<uint8_t>(b.begin(), b.end()), t.bytes) << t.name;
    EXPECT_EQ(info->dtype, t.dtype) << t.name;
  }
  // the configs vLLM reads
  const auto hq = nlohmann::json::parse(ck.read_text("hf_quant_config.json"));
  EXPECT_EQ(hq["producer"]["name"], "modelopt");
  EXPECT_EQ(hq["quantization"]["quant_algo"], f == WeightFormat::nvfp4 ? "NVFP4" : "MXFP4");
  EXPECT_EQ(hq["quantization"]["group_size"], f == WeightFormat::nvfp4 ? 16 : 32);
  const auto& ex = hq["quantization"]["exclude_modules"];
  const std::string L1 = "model.layers." + std::to_string(s.layers - 1) + ".";
  EXPECT_NE(std::find(ex.begin(), ex.end(), L1 + "self_attn.q_proj"), ex.end());
  EXPECT_NE(std::find(ex.begin(), ex.end(), "model.embed_tokens"), ex.end());
  for (const auto& name : ex) EXPECT_EQ(name.get<std::string>().find(".experts.0."), std::string::npos) << name;
  EXPECT_EQ(nlohmann::json::parse(ck.read_text("config.json"))["quantization_config"]["quant_algo"],
            hq["quantization"]["quant_algo"]);

  std::mt19937 rng(std::random_device{}());
  for (int l = s.first_moe; l < s.layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const LoadedLayer L = load_moe_layer(ck, l);
    const Expected x = quantize_in_memory(m, s, l, f);
    EXPECT_EQ(L.desc.hidden, s.H);
    EXPECT_EQ(L.desc.intermediate, s.I);
    EXPECT_EQ(L.desc.num_experts, s.E);
    EXPECT_EQ(L.desc.top_k, s.k);
    EXPECT_EQ(L.desc.weight_format, f);
    EXPECT_EQ(L.desc.gate_up, GateUpLayout::concat);
    EXPECT_EQ(bytes_of(L.weights.w13), x.w13);
    EXPECT_EQ(bytes_of(L.weights.w13_scale), x.w13s);
    EXPECT_EQ(bytes_of(L.weights.w2), x.w2);
    EXPECT_EQ(bytes_of(L.weights.w2_scale), x.w2s);
    if (f == WeightFormat::nvfp4) {
      EXPECT_EQ(floats_of(L.weights.w13_scale_2), x.w13_dq);
      EXPECT_EQ(floats_of(L.weights.w2_scale_2), x.w2_dq);
    }
    EXPECT_FALSE(L.weights.w13_input_scale.present());
    // router as written
    const std::string moe = s.naming == Naming::mixtral ? ".block_sparse_moe" : ".mlp";
    const auto& rw = m.values.at("model.layers." + std::to_string(l) + moe + ".gate.weight");
    ASSERT_EQ(L.router_weight.dtype, DType::bf16);
    for (size_t i = 0; i < rw.size(); ++i)
      ASSERT_EQ(bf16_to_f32(static_cast<const uint16_t*>(L.router_weight.data)[i]), rw[i]);
    if (s.naming == Naming::deepseek) {
      EXPECT_EQ(L.desc.routing.method, RoutingMethod::sigmoid_grouped);
      EXPECT_EQ(L.desc.routing.n_group, 2);
      EXPECT_EQ(L.desc.routing.topk_group, 1);
      EXPECT_FLOAT_EQ(L.desc.routing.routed_scaling_factor, 2.5f);
      EXPECT_EQ(floats_of(L.correction_bias),
                m.values.at("model.layers." + std::to_string(l) + ".mlp.gate.e_score_correction_bias"));
    } else {
      EXPECT_EQ(L.desc.routing.method, RoutingMethod::softmax);
      EXPECT_TRUE(L.desc.routing.renormalize);
      EXPECT_FALSE(L.correction_bias.present());
    }
    // the layer's output on the reference backend: bit-exact
    const int64_t T = 7;
    std::vector<uint16_t> hs(size_t(T * s.H));
    std::normal_distribution<float> nd;
    for (auto& v : hs) v = bf16_from_f32(nd(rng));
    std::vector<int32_t> ids(size_t(T * s.k));
    std::vector<float> tw(ids.size());
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> perm(size_t(s.E));
      for (int64_t e = 0; e < s.E; ++e) perm[size_t(e)] = int32_t(e);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t j = 0; j < s.k; ++j) {
        ids[size_t(t * s.k + j)] = perm[size_t(j)];
        tw[size_t(t * s.k + j)] = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
      }
    }
    LayerDesc d = L.desc;
    const auto got = run_reference(d, L.weights, hs, ids, tw, T);
    const auto want = run_reference(d, x.view(s, f), hs, ids, tw, T);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
    double norm = 0;
    for (float v : want) norm += double(v) * v;
    EXPECT_GT(norm, 0.0);  // the comparison is not of two zero outputs
  }
}

TEST(QuantizeCheckpoint, Qwen3OneFileNvfp4) { check_round_trip({Naming::qwen3, 64, 32, 4, 2, 2, 0, false}, WeightFormat::nvfp4); }
TEST(QuantizeCheckpoint, Qwen3ShardedNvfp4) { check_round_trip({Naming::qwen3, 64, 32, 4, 2, 2, 0, true}, WeightFormat::nvfp4); }
TEST(QuantizeCheckpoint, DeepSeekShardedNvfp4) {
  check_round_trip({Naming::deepseek, 64, 48, 8, 3, 3, 1, true}, WeightFormat::nvfp4);
}
TEST(QuantizeCheckpoint, MixtralNvfp4) { check_round_trip({Naming::mixtral, 32, 64, 4, 2, 1, 0, false}, WeightFormat::nvfp4); }
TEST(QuantizeCheckpoint, Qwen3Mxfp4) { check_round_trip({Naming::qwen3, 64, 32, 4, 2, 1, 0, true}, WeightFormat::mxfp4); }

TEST(QuantizeCheckpoint, CalibrationGivesInputScalesAndEnablesW4A4) {
  TmpDir in, out;
  const Spec s{Naming::qwen3, 64, 32, 4, 2, 2, 0, false};
  write_model(s, in.path.string());
  // layer 0: every expert by "*", expert 2's up by name (larger: gate and up share the max)
  write_file(in / "calib.json", R"({"model.layers.0.mlp.experts.*.gate_proj": 3.0,
                                    "model.layers.0.mlp.experts.*.up_proj": 3.0,
                                    "model.layers.0.mlp.experts.*.down_proj": 12.0,
                                    "model.layers.0.mlp.experts.2.up_proj": 6.0})");
  QuantizeOptions q;
  q.calibration = in / "calib.json";
  const QuantizeReport r = quantize_checkpoint(in.path.string(), out.path.string(), q);
  EXPECT_EQ(r.calibrated, 3 * s.E);  // layer 0 only
  const Checkpoint ck = Checkpoint::open(out.path.string());
  const LoadedLayer L0 = load_moe_layer(ck, 0);
  ASSERT_TRUE(L0.weights.w13_input_scale.present());
  const auto a13 = floats_of(L0.weights.w13_input_scale), a2 = floats_of(L0.weights.w2_input_scale);
  for (int64_t e = 0; e < s.E; ++e) {
    EXPECT_EQ(a13[size_t(e)], (e == 2 ? 6.0f : 3.0f) / 2688.0f) << e;
    EXPECT_EQ(a2[size_t(e)], 12.0f / 2688.0f) << e;
  }
  LayerDesc d = L0.desc;
  d.act_quant = ActQuant::nvfp4;
  EXPECT_NO_THROW(Layer::prepare(d, L0.weights, {"reference", -1}));
  // layer 1 had no amax: no input_scale, and W4A4 refuses naming it
  const LoadedLayer L1 = load_moe_layer(ck, 1);
  EXPECT_FALSE(L1.weights.w13_input_scale.present());
  d = L1.desc;
  d.act_quant = ActQuant::nvfp4;
  try {
    Layer::prepare(d, L1.weights, {"reference", -1});
    ADD_FAILURE() << "W4A4 without input_scale was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input_scale"), std::string::npos) << e.what();
  }
}

TEST(QuantizeCheckpoint, LayerSubsetLeavesOthersUnquantized) {
  TmpDir in, out;
  const Spec s{Naming::qwen3, 64, 32, 4, 2, 3, 0, false};
  write_model(s, in.path.string());
  QuantizeOptions q;
  q.layers = {1};
  const QuantizeReport r = quantize_checkpoint(in.path.string(), out.path.string(), q);
  EXPECT_EQ(r.layers, std::vector<int>{1});
  const Checkpoint ck = Checkpoint::open(out.path.string());
  EXPECT_EQ(ck.find("model.layers.0.mlp.experts.0.gate_proj.weight").second->dtype, "BF16");
  EXPECT_EQ(ck.find("model.layers.1.mlp.experts.0.gate_proj.weight").second->dtype, "U8");
  EXPECT_NO_THROW(load_moe_layer(ck, 1));
  try {
    load_moe_layer(ck, 2);
    ADD_FAILURE() << "an unquantized layer loaded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model.layers.2.mlp.experts.0.gate_proj.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("BF16"), std::string::npos) << m;
  }
  const auto ex = nlohmann::json::parse(ck.read_text("hf_quant_config.json"))["quantization"]["exclude_modules"];
  EXPECT_NE(std::find(ex.begin(), ex.end(), "model.layers.0.mlp.experts.3.down_proj"), ex.end());
  EXPECT_EQ(std::find(ex.begin(), ex.end(), "model.layers.1.mlp.experts.3.down_proj"), ex.end());
}

TEST(QuantizeCheckpoint, BadInputsNameWhatIsWrong) {
  TmpDir in, out;
  const Spec s{Naming::qwen3, 64, 32, 4, 2, 2, 0, false};
  write_model(s, in.path.string());
  const std::string i = in.path.string(), o = out.path.string();
  expect_error([&] { quantize_checkpoint(i, i); }, {"OUT_DIR"});
  expect_error([&] { quantize_checkpoint(i + "/nope", o); }, {"IN_DIR", "nope"});
  QuantizeOptions q;
  q.layers = {5};
  expect_error([&] { quantize_checkpoint(i, o, q); }, {"layers", "5"});
  write_file(in / "bad.json", R"({"model.layers.0.mlp.experts.0.gate_proj": -1})");
  q = {};
  q.calibration = in / "bad.json";
  expect_error([&] { quantize_checkpoint(i, o, q); }, {"calibration", "experts.0.gate_proj", "positive"});
  write_file(in / "bad.json", "[1, 2");
  expect_error([&] { quantize_checkpoint(i, o, q); }, {"calibration", "JSON"});

  // a NaN weight, and a gate without its up
  TmpDir in2;
  Model m;
  m.bf16("model.layers.0.mlp.experts.0.gate_proj.weight", 32, 64, 1.0f);
  m.bf16("model.layers.0.mlp.experts.0.up_proj.weight", 32, 64, 1.0f);
  m.bf16("model.layers.0.mlp.experts.0.down_proj.weight", 64, 32, 1.0f);
  m.tensors[2].bytes[6] = 0xC0, m.tensors[2].bytes[7] = 0x7F;  // element 3: bf16 NaN
  write_file(in2 / "config.json", R"({"model_type": "qwen3_moe"})");
  write_st(in2 / "model.safetensors", m.tensors);
  expect_error([&] { quantize_checkpoint(in2.path.string(), o); },
               {"model.safetensors", "model.layers.0.mlp.experts.0.down_proj.weight", "finite"});
  m.tensors.erase(m.tensors.begin() + 1);
  write_st(in2 / "model.safetensors", m.tensors);
  expect_error([&] { quantize_checkpoint(in2.path.string(), o); },
               {"model.layers.0.mlp.experts.0.gate_proj.weight", "up_proj.weight", "missing"});
}

TEST(QuantizeCheckpoint, ParseLayerList) {
  EXPECT_EQ(parse_layer_list("0,3-5"), (std::vector<int>{0, 3, 4, 5}));
  EXPECT_EQ(parse_layer_list("7"), std::vector<int>{7});
  EXPECT_EQ(parse_layer_list("4,2-3,3"), (std::vector<int>{2, 3, 4}));
  for (const char* bad : {"", "a", "1,", ",1", "3-1", "1--2", "1-", "-1", "1 2"})
    EXPECT_THROW(parse_layer_list(bad), Error) << bad;
}

}  // namespace
}  // namespace fp4moe
