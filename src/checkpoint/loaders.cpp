// load_moe_layer: one MoE layer of a real checkpoint, gathered into SPEC §3's layout.
//
// Two on-disk layouts are read (names checked against vLLM's model loaders deepseek_v2.py,
// qwen3_moe.py, mixtral.py, gpt_oss.py, ModelOpt's unified HF export docs and the public
// config.json files of DeepSeek-V3, Kimi-K2, Qwen3-30B-A3B and gpt-oss-120b):
//
// ModelOpt unified HF export (NVFP4; DeepSeek-V3/R1, Kimi-K2, Qwen3-MoE, Mixtral), one
// linear per expert and projection, P = model.layers.{L}.mlp.experts.{e}.{gate,up,down}_proj
// (Mixtral: model.layers.{L}.block_sparse_moe.experts.{e}.{w1,w3,w2}):
//   P.weight          U8      [out, in/2]   two e2m1 per byte, low nibble first
//   P.weight_scale    F8_E4M3 [out, in/16]  linear block scales
//   P.weight_scale_2  F32     [] or [1]     weight dq_scale; gate and up share it
//   P.input_scale     F32     [] or [1]     activation dq_scale (static calibration), optional
// fp4moe quantize --format mxfp4 writes the same names with weight_scale F8_E8M0|U8
// [out, in/32] and no weight_scale_2 (quant_algo "MXFP4").
// The router: model.layers.{L}.mlp.gate.weight [E, H] (Mixtral: block_sparse_moe.gate.weight),
// and for DeepSeek/Kimi mlp.gate.e_score_correction_bias [E] (the noaux_tc selection bias).
// The quantization format comes from hf_quant_config.json {"quantization": {"quant_algo"}}
// or config.json {"quantization_config": {"quant_algo"}}.
//
// gpt-oss (MXFP4 as OpenAI released it), all experts in one tensor, P = model.layers.{L}.mlp.experts:
//   P.gate_up_proj_blocks U8   [E, 2I, H/32, 16]  32 e2m1 per 16 bytes, low nibble first;
//                                                  rows interleaved: 2i gate_i, 2i+1 up_i
//   P.gate_up_proj_scales U8   [E, 2I, H/32]      e8m0 codes (2^(code-127))
//   P.gate_up_proj_bias   BF16 [E, 2I]            interleaved like the rows
//   P.down_proj_blocks    U8   [E, H, I/32, 16], down_proj_scales [E, H, I/32], down_proj_bias [E, H]
//   model.layers.{L}.mlp.router.weight [E, H], .bias [E]  (logits = x W^T + b)
// config.json {"quantization_config": {"quant_method": "mxfp4"}}, swiglu_limit (7.0).
//
// config.json keys (a nested "text_config" is used when present):
//   hidden_size                  H
//   moe_intermediate_size        I (DeepSeek, Kimi, Qwen3-MoE; their intermediate_size is
//                                the dense MLP's), else intermediate_size (gpt-oss, Mixtral)
//   n_routed_experts             E (DeepSeek, Kimi), num_experts (Qwen3-MoE),
//                                num_local_experts (gpt-oss, Mixtral)
//   num_experts_per_tok          k (gpt-oss also writes experts_per_token)
//   scoring_func                 "sigmoid" -> sigmoid_grouped, "softmax" (default) -> softmax
//   n_group, topk_group          groups of experts and groups kept (sigmoid_grouped)
//   routed_scaling_factor        factor on the routing weights (DeepSeek 2.5, Kimi 2.827)
//   norm_topk_prob               renormalize the top-k weights (Qwen3 default false, others true)
//   hidden_act                   "silu" (gpt-oss: swiglu_oai whatever it says)
//   first_k_dense_replace        DeepSeek/Kimi: layers below it are dense (no experts)
//   decoder_sparse_step, mlp_only_layers  Qwen3-MoE: which layers are MoE
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "backend.hpp"
#include "fp4moe/checkpoint.hpp"
#include "fp4moe/format.h"

namespace fp4moe {
namespace {

using detail::fail;
using detail::fail_arg;
using json = nlohmann::json;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// The config files, parsed; every error names the file and the key.
struct Config {
  std::string dir;
  json cfg;          // config.json (or its text_config)
  json quant;        // the quantization section, or null
  std::string quant_file;

  static Config read(const Checkpoint& ckpt) {
    Config c;
    c.dir = ckpt.dir();
    const std::string text = ckpt.read_text("config.json");
    if (text.empty()) fail_arg(c.dir + "/config.json: not found, need the model's config.json");
    json top;
    try {
      top = json::parse(text);
    } catch (const std::exception& e) {
      fail_arg(c.dir + "/config.json: not valid JSON (" + e.what() + ")");
    }
    if (!top.is_object()) fail_arg(c.dir + "/config.json: got " + std::string(top.type_name()) + ", need an object");
    c.cfg = top;
    if (top.contains("text_config") && top["text_config"].is_object()) {
      c.cfg = top["text_config"];
      if (!c.cfg.contains("model_type") && top.contains("model_type")) c.cfg["model_type"] = top["model_type"];
    }
    const std::string hq = ckpt.read_text("hf_quant_config.json");
    if (!hq.empty()) {
      json q;
      try {
        q = json::parse(hq);
      } catch (const std::exception& e) {
        fail_arg(c.dir + "/hf_quant_config.json: not valid JSON (" + e.what() + ")");
      }
      if (!q.is_object() || !q.contains("quantization") || !q["quantization"].is_object())
        fail_arg(c.dir + "/hf_quant_config.json: no \"quantization\" object, need {\"quantization\": {\"quant_algo\": ...}}");
      c.quant = q["quantization"];
      c.quant_file = "hf_quant_config.json";
    } else if (top.contains("quantization_config") && top["quantization_config"].is_object()) {
      c.quant = top["quantization_config"];
      c.quant_file = "config.json";
    }
    return c;
  }

  std::string where(const std::string& key) const { return dir + "/config.json: " + key; }
  bool has(const std::string& key) const { return cfg.contains(key) && !cfg[key].is_null(); }

  int64_t integer(const std::string& key) const {
    if (!has(key)) fail_arg(where(key) + ": missing, need a positive integer");
    const json& v = cfg[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t(1) << 31))
      fail_arg(where(key) + ": got " + v.dump() + ", need a positive integer");
    return v.get<int64_t>();
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  // The first of `keys` present.
  int64_t integer_any(std::initializer_list<const char*> keys) const {
    std::string names;
    for (const char* k : keys) {
      if (has(k)) return integer(k);
      names += std::string(names.empty() ? "" : " or ") + k;
    }
    fail_arg(dir + "/config.json: " + names + ": missing, need a positive integer");
  }
  double number_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = cfg[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      fail_arg(where(key) + ": got " + v.dump() + ", need a positive number");
    return v.get<double>();
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!cfg[key].is_boolean()) fail_arg(where(key) + ": got " + cfg[key].dump() + ", need true or false");
    return cfg[key].get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!cfg[key].is_string()) fail_arg(where(key) + ": got " + cfg[key].dump() + ", need a string");
    return cfg[key].get<std::string>();
  }
};

// Reads tensors of one checkpoint, checking dtype and shape with messages naming the file.
struct Reader {
  const Checkpoint& ckpt;

  std::string where(const std::string& name) const {
    auto [file, info] = ckpt.find(name);
    (void)info;
    return file->path() + ": tensor " + name;
  }
  const TensorInfo& info(const std::string& name) const { return *ckpt.find(name).second; }
  std::span<const uint8_t> bytes(const std::string& name) const {
    auto [file, info] = ckpt.find(name);
    return file->bytes(*info);
  }
  // dtype in `dtypes` and shape == `shape` (a scalar accepts [] and [1]).
  const TensorInfo& expect(const std::string& name, std::initializer_list<const char*> dtypes,
                           const std::vector<int64_t>& shape) const {
    const TensorInfo& t = info(name);
    bool dtype_ok = false;
    std::string want;
    for (const char* d : dtypes) {
      dtype_ok |= t.dtype == d;
      want += std::string(want.empty() ? "" : "|") + d;
    }
    const bool scalar = shape.empty();
    const bool shape_ok = scalar ? (t.shape.empty() || t.shape == std::vector<int64_t>{1}) : t.shape == shape;
    if (!dtype_ok || !shape_ok)
      fail_arg(where(name) + ": got " + t.dtype + shape_str(t.shape) + ", need " + want +
               (scalar ? "[] or [1]" : shape_str(shape)));
    return t;
  }
  float scalar_f32(const std::string& name) const {
    expect(name, {"F32"}, {});
    float v;
    std::memcpy(&v, bytes(name).data(), 4);
    if (!std::isfinite(v) || v <= 0.0f)
      fail_arg(where(name) + ": got " + std::to_string(v) + ", need a finite positive scale");
    return v;
  }
  // A float vector [n] (F32|BF16|F16) as f32.
  std::vector<float> vector_f32(const std::string& name, int64_t n) const {
    const TensorInfo& t = expect(name, {"F32", "BF16", "F16"}, {n});
    const auto b = bytes(name);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (t.dtype == "F32") {
        std::memcpy(&out[size_t(i)], b.data() + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, b.data() + 2 * i, 2);
        out[size_t(i)] = t.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
      }
    }
    return out;
  }
};

// Appends an owned buffer and returns a contiguous view of it.
TensorView own(LoadedLayer& L, std::vector<uint8_t> bytes, DType dtype, std::vector<int64_t> shape) {
  L.storage.push_back(std::move(bytes));
  return TensorView::of(L.storage.back().data(), dtype, shape);
}
TensorView own_f32(LoadedLayer& L, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return own(L, std::move(b), DType::f32, {int64_t(v.size())});
}

// The router's linear weight [E, H], kept as bf16|f32 (f16 becomes f32, exactly).
TensorView load_router_weight(LoadedLayer& L, const Reader& r, const std::string& name, int64_t E, int64_t H) {
  const TensorInfo& t = r.expect(name, {"BF16", "F32", "F16"}, {E, H});
  const auto b = r.bytes(name);
  if (t.dtype == "BF16") return own(L, {b.begin(), b.end()}, DType::bf16, {E, H});
  if (t.dtype == "F32") return own(L, {b.begin(), b.end()}, DType::f32, {E, H});
  std::vector<uint8_t> out(size_t(E * H) * 4);
  for (int64_t i = 0; i < E * H; ++i) {
    uint16_t h;
    std::memcpy(&h, b.data() + 2 * i, 2);
    const float f = f16_to_f32(h);
    std::memcpy(out.data() + 4 * i, &f, 4);
  }
  return own(L, std::move(out), DType::f32, {E, H});
}

// Is `layer` a MoE layer at all? Dense layers of DeepSeek/Kimi/Qwen3 get a precise message
// instead of "tensor not found".
void check_moe_layer(const Config& c, int layer) {
  const int64_t n_layers = c.integer_or("num_hidden_layers", int64_t(1) << 30);
  if (layer < 0 || layer >= n_layers)
    fail_arg("layer: got " + std::to_string(layer) + ", need [0, " + std::to_string(n_layers) +
             ") (num_hidden_layers in " + c.dir + "/config.json)");
  if (c.has("first_k_dense_replace") && c.cfg["first_k_dense_replace"].is_number_integer() &&
      layer < c.cfg["first_k_dense_replace"].get<int64_t>())
    fail_arg("layer: got " + std::to_string(layer) + ", a dense layer (first_k_dense_replace = " +
             c.cfg["first_k_dense_replace"].dump() + " in " + c.dir + "/config.json), need a MoE layer");
  if (c.has("mlp_only_layers") && c.cfg["mlp_only_layers"].is_array())
    for (const auto& v : c.cfg["mlp_only_layers"])
      if (v.is_number_integer() && v.get<int64_t>() == layer)
        fail_arg("layer: got " + std::to_string(layer) + ", a dense layer (mlp_only_layers in " + c.dir +
                 "/config.json), need a MoE layer");
}

// Routing and activation from config.json.
void read_routing(const Config& c, LoadedLayer& L, bool gpt_oss) {
  const std::string mt = L.model_type;
  const std::string scoring = c.string_or("scoring_func", "softmax");
  RoutingDesc& r = L.desc.routing;
  if (scoring == "sigmoid") {
    r.method = RoutingMethod::sigmoid_grouped;
    r.n_group = int(c.integer_or("n_group", 1));
    r.topk_group = int(c.integer_or("topk_group", 1));
    if (L.desc.num_experts % r.n_group != 0 || r.topk_group > r.n_group)
      fail_arg(c.where("n_group") + ": got n_group " + std::to_string(r.n_group) + ", topk_group " +
               std::to_string(r.topk_group) + " for " + std::to_string(L.desc.num_experts) +
               " experts, need n_group dividing E and topk_group <= n_group");
  } else if (scoring == "softmax") {
    r.method = RoutingMethod::softmax;
    if (c.integer_or("n_group", 1) > 1 && c.string_or("topk_method", "greedy") != "greedy")
      fail(ErrorKind::unsupported, c.where("topk_method") + ": got '" + c.string_or("topk_method", "") +
                                       "' with softmax scoring, need 'greedy' (group-limited softmax routing is not supported)");
  } else {
    fail(ErrorKind::unsupported, c.where("scoring_func") + ": got '" + scoring + "', need 'softmax' or 'sigmoid'");
  }
  // HF defaults: Qwen3MoeConfig.norm_topk_prob = false; DeepSeek-V3/Kimi true; Mixtral and
  // gpt-oss always renormalize (softmax over the selected logits).
  const bool always = gpt_oss || mt == "mixtral";
  r.renormalize = always ? true : c.boolean_or("norm_topk_prob", mt != "qwen3_moe" && mt != "qwen2_moe");
  r.routed_scaling_factor = float(c.number_or("routed_scaling_factor", 1.0));

  if (gpt_oss) {
    L.desc.activation = Activation::swiglu_oai;
    L.desc.gate_up = GateUpLayout::interleaved;
    L.desc.swiglu_limit = float(c.number_or("swiglu_limit", 7.0));
  } else {
    const std::string act = c.string_or("hidden_act", "silu");
    if (act != "silu" && act != "swish")
      fail(ErrorKind::unsupported, c.where("hidden_act") + ": got '" + act + "', need 'silu'");
    L.desc.activation = Activation::silu;
    L.desc.gate_up = GateUpLayout::concat;
  }
}

// The quantization format from the quantization section.
WeightFormat read_format(const Config& c, bool gpt_oss) {
  if (c.quant.is_null())
    fail_arg(c.dir + ": no hf_quant_config.json and no quantization_config in config.json, need an NVFP4 "
             "(ModelOpt) or MXFP4 (gpt-oss) checkpoint; `fp4moe quantize` makes one");
  const std::string file = c.dir + "/" + c.quant_file;
  if (c.quant.contains("quant_algo") && c.quant["quant_algo"].is_string()) {
    const std::string a = c.quant["quant_algo"].get<std::string>();
    if (a == "NVFP4") return WeightFormat::nvfp4;
    if (a == "MXFP4") return WeightFormat::mxfp4;
    fail(ErrorKind::unsupported, file + ": quant_algo: got '" + a + "', need 'NVFP4' or 'MXFP4'");
  }
  if (c.quant.contains("quant_method") && c.quant["quant_method"].is_string()) {
    const std::string m = c.quant["quant_method"].get<std::string>();
    if (m == "mxfp4") return WeightFormat::mxfp4;
    fail(ErrorKind::unsupported, file + ": quant_method: got '" + m +
                                     "', need 'mxfp4' (gpt-oss) or a ModelOpt quant_algo 'NVFP4'");
  }
  (void)gpt_oss;
  fail_arg(file + ": no quant_algo or quant_method, need one");
}

// ModelOpt layout: per expert and projection, gathered into w13 (gate rows then up rows) and w2.
void load_modelopt(LoadedLayer& L, const Reader& r, const std::string& moe, bool mixtral) {
  const int64_t E = L.desc.num_experts, H = L.desc.hidden, I = L.desc.intermediate;
  const bool nv = L.desc.weight_format == WeightFormat::nvfp4;
  const int64_t blk = nv ? kNvfp4Block : kMxfp4Block;
  const DType sdt = nv ? DType::e4m3 : DType::e8m0;
  const char* gate_n = mixtral ? "w1" : "gate_proj";
  const char* up_n = mixtral ? "w3" : "up_proj";
  const char* down_n = mixtral ? "w2" : "down_proj";
  auto proj = [&](int64_t e, const char* p) { return moe + ".experts." + std::to_string(e) + "." + p; };

  std::vector<uint8_t> w13(size_t(E * 2 * I * H / 2)), w13s(size_t(E * 2 * I * H / blk));
  std::vector<uint8_t> w2(size_t(E * H * I / 2)), w2s(size_t(E * H * I / blk));
  std::vector<float> w13_dq(size_t(E), 1.0f), w2_dq(size_t(E), 1.0f);
  std::vector<float> a13(static_cast<size_t>(E)), a2(static_cast<size_t>(E));
  // input scales: all experts have them or none (checked against expert 0)
  const bool has_input = r.ckpt.has(proj(0, gate_n) + ".input_scale");

  auto copy_linear = [&](const std::string& p, int64_t rows, int64_t cols, uint8_t* data, uint8_t* scale) {
    r.expect(p + ".weight", {"U8"}, {rows, cols / 2});
    if (nv)
      r.expect(p + ".weight_scale", {"F8_E4M3", "U8"}, {rows, cols / blk});
    else
      r.expect(p + ".weight_scale", {"F8_E8M0", "U8"}, {rows, cols / blk});
    const auto d = r.bytes(p + ".weight");
    const auto s = r.bytes(p + ".weight_scale");
    std::memcpy(data, d.data(), d.size());
    std::memcpy(scale, s.data(), s.size());
  };
  for (int64_t e = 0; e < E; ++e) {
    const std::string g = proj(e, gate_n), u = proj(e, up_n), d = proj(e, down_n);
    uint8_t* w13e = w13.data() + e * 2 * I * H / 2;
    uint8_t* w13se = w13s.data() + e * 2 * I * H / blk;
    copy_linear(g, I, H, w13e, w13se);
    copy_linear(u, I, H, w13e + I * H / 2, w13se + I * H / blk);
    copy_linear(d, H, I, w2.data() + e * H * I / 2, w2s.data() + e * H * I / blk);
    if (nv) {
      const float gs = r.scalar_f32(g + ".weight_scale_2"), us = r.scalar_f32(u + ".weight_scale_2");
      if (gs != us)
        fail_arg(r.where(g + ".weight_scale_2") + ": gate/up weight_scale_2 differ: " + std::to_string(gs) +
                 " (" + gate_n + ") vs " + std::to_string(us) + " (" + up_n + ") for expert " + std::to_string(e) +
                 "; need one shared global scale, re-export with fused gate/up scales");
      w13_dq[size_t(e)] = gs;
      w2_dq[size_t(e)] = r.scalar_f32(d + ".weight_scale_2");
    }
    if (has_input) {
      // gate and up read the same input; vLLM takes the max of their scales (and over experts)
      a13[size_t(e)] = std::max(r.scalar_f32(g + ".input_scale"), r.scalar_f32(u + ".input_scale"));
      a2[size_t(e)] = r.scalar_f32(d + ".input_scale");
    }
  }
  CheckpointWeights& w = L.weights;
  w.w13 = own(L, std::move(w13), DType::u8, {E, 2 * I, H / 2});
  w.w13_scale = own(L, std::move(w13s), sdt, {E, 2 * I, H / blk});
  w.w2 = own(L, std::move(w2), DType::u8, {E, H, I / 2});
  w.w2_scale = own(L, std::move(w2s), sdt, {E, H, I / blk});
  if (nv) {
    w.w13_scale_2 = own_f32(L, w13_dq);
    w.w2_scale_2 = own_f32(L, w2_dq);
  }
  if (has_input) {
    w.w13_input_scale = own_f32(L, a13);
    w.w2_input_scale = own_f32(L, a2);
  }
}

// gpt-oss layout: whole-layer tensors, gate/up interleaved, e8m0 scales and biases.
void load_gpt_oss(LoadedLayer& L, const Reader& r, const std::string& moe) {
  const int64_t E = L.desc.num_experts, H = L.desc.hidden, I = L.desc.intermediate;
  const std::string P = moe + ".experts.";
  auto raw = [&](const std::string& name, const char* dtype, std::vector<int64_t> shape, DType dt,
                 std::vector<int64_t> as) {
    if (dtype == std::string("U8"))
      r.expect(name, {"U8", "F8_E8M0"}, shape);
    else
      r.expect(name, {dtype}, shape);
    const auto b = r.bytes(name);
    return own(L, {b.begin(), b.end()}, dt, std::move(as));
  };
  CheckpointWeights& w = L.weights;
  w.w13 = raw(P + "gate_up_proj_blocks", "U8", {E, 2 * I, H / 32, 16}, DType::u8, {E, 2 * I, H / 2});
  w.w13_scale = raw(P + "gate_up_proj_scales", "U8", {E, 2 * I, H / 32}, DType::e8m0, {E, 2 * I, H / 32});
  w.w2 = raw(P + "down_proj_blocks", "U8", {E, H, I / 32, 16}, DType::u8, {E, H, I / 2});
  w.w2_scale = raw(P + "down_proj_scales", "U8", {E, H, I / 32}, DType::e8m0, {E, H, I / 32});
  auto bias = [&](const std::string& name, int64_t rows, int64_t cols) {
    const TensorInfo& t = r.expect(name, {"BF16", "F32"}, {rows, cols});
    const auto b = r.bytes(name);
    return own(L, {b.begin(), b.end()}, t.dtype == "BF16" ? DType::bf16 : DType::f32, {rows, cols});
  };
  if (r.ckpt.has(P + "gate_up_proj_bias")) w.w13_bias = bias(P + "gate_up_proj_bias", E, 2 * I);
  if (r.ckpt.has(P + "down_proj_bias")) w.w2_bias = bias(P + "down_proj_bias", E, H);
}

}  // namespace

LoadedLayer load_moe_layer(const Checkpoint& ckpt, int layer) {
  const Config c = Config::read(ckpt);
  LoadedLayer L;
  L.model_type = c.string_or("model_type", "");
  check_moe_layer(c, layer);

  const std::string base = "model.layers." + std::to_string(layer);
  const bool gpt_oss = ckpt.has(base + ".mlp.experts.gate_up_proj_blocks") || L.model_type == "gpt_oss";
  const bool mixtral = !gpt_oss && (ckpt.has(base + ".block_sparse_moe.gate.weight") || L.model_type == "mixtral");
  const std::string moe = base + (mixtral ? ".block_sparse_moe" : ".mlp");

  LayerDesc& d = L.desc;
  d.hidden = c.integer("hidden_size");
  d.intermediate = c.integer_any({"moe_intermediate_size", "intermediate_size"});
  d.num_experts = c.integer_any({"n_routed_experts", "num_experts", "num_local_experts"});
  d.top_k = c.integer_any({"num_experts_per_tok", "experts_per_token"});
  if (d.top_k > d.num_experts)
    fail_arg(c.where("num_experts_per_tok") + ": got " + std::to_string(d.top_k) + ", need at most E = " +
             std::to_string(d.num_experts));
  d.weight_format = read_format(c, gpt_oss);
  const int64_t blk = d.weight_format == WeightFormat::nvfp4 ? kNvfp4Block : kMxfp4Block;
  if (d.hidden % blk || d.intermediate % blk)
    fail_arg(c.dir + "/config.json: hidden_size " + std::to_string(d.hidden) + ", intermediate " +
             std::to_string(d.intermediate) + ": need multiples of " + std::to_string(blk) + " for " +
             to_string(d.weight_format));
  if (gpt_oss && d.weight_format != WeightFormat::mxfp4)
    fail_arg(c.dir + ": gpt-oss expert tensors (" + base + ".mlp.experts.gate_up_proj_blocks) need quant_method 'mxfp4'");
  read_routing(c, L, gpt_oss);

  const Reader r{ckpt};
  if (gpt_oss)
    load_gpt_oss(L, r, base + ".mlp");
  else
    load_modelopt(L, r, moe, mixtral);

  const std::string router = moe + (gpt_oss ? ".router" : ".gate");
  L.router_weight = load_router_weight(L, r, router + ".weight", d.num_experts, d.hidden);
  if (ckpt.has(router + ".bias")) L.router_bias = own_f32(L, r.vector_f32(router + ".bias", d.num_experts));
  if (ckpt.has(router + ".e_score_correction_bias"))
    L.correction_bias = own_f32(L, r.vector_f32(router + ".e_score_correction_bias", d.num_experts));
  return L;
}

}  // namespace fp4moe
