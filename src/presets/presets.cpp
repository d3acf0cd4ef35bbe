// SPEC §5, one row per preset. Routing constants are those of the models' configs
// (n_group, topk_group, routed_scaling_factor, norm_topk_prob).
#include "fp4moe/presets.hpp"

namespace fp4moe {
namespace {

LayerDesc nvfp4_layer(int64_t H, int64_t I, int64_t E, int64_t k, RoutingDesc routing) {
  LayerDesc d;
  d.hidden = H;
  d.intermediate = I;
  d.num_experts = E;
  d.top_k = k;
  d.weight_format = WeightFormat::nvfp4;
  d.act_quant = ActQuant::none;
  d.activation = Activation::silu;
  d.gate_up = GateUpLayout::concat;  // ModelOpt exports gate then up
  d.routing = routing;
  return d;
}

RoutingDesc softmax_renorm() {
  RoutingDesc r;
  r.method = RoutingMethod::softmax;
  r.renormalize = true;
  return r;
}

RoutingDesc sigmoid_grouped(int n_group, int topk_group, float scale) {
  RoutingDesc r;
  r.method = RoutingMethod::sigmoid_grouped;
  r.renormalize = true;
  r.n_group = n_group;
  r.topk_group = topk_group;
  r.routed_scaling_factor = scale;
  return r;
}

std::vector<Preset> make_presets() {
  std::vector<Preset> p;
  p.push_back({"kimi-k2", "moonshotai/Kimi-K2-Instruct",
               nvfp4_layer(7168, 2048, 384, 8, sigmoid_grouped(1, 1, 2.827f)), false});
  p.push_back({"deepseek-v3", "deepseek-ai/DeepSeek-V3",
               nvfp4_layer(7168, 2048, 256, 8, sigmoid_grouped(8, 4, 2.5f)), false});
  p.push_back({"qwen3-235b", "Qwen/Qwen3-235B-A22B", nvfp4_layer(4096, 1536, 128, 8, softmax_renorm()),
               false});
  p.push_back({"qwen3-30b", "Qwen/Qwen3-30B-A3B", nvfp4_layer(2048, 768, 128, 8, softmax_renorm()),
               false});
  // gpt-oss ships MXFP4 experts with biases; its gate_up_proj interleaves gate (even rows)
  // and up (odd rows), and its activation is the clamped swiglu with alpha 1.702, limit 7.
  LayerDesc oss = nvfp4_layer(2880, 2880, 128, 4, softmax_renorm());
  oss.weight_format = WeightFormat::mxfp4;
  oss.activation = Activation::swiglu_oai;
  oss.gate_up = GateUpLayout::interleaved;
  oss.swiglu_alpha = 1.702f;
  oss.swiglu_limit = 7.0f;
  p.push_back({"gpt-oss-120b", "openai/gpt-oss-120b", oss, true});
  return p;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = make_presets();
  return all;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace fp4moe
