// The presets against SPEC §5's table, written out here a second time on purpose.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fp4moe/presets.hpp"

namespace fp4moe {
namespace {

struct Row {
  const char* name;
  int64_t H, I, E, k;
  RoutingMethod method;
  int n_group, topk_group;
  float scale;
  WeightFormat format;
  Activation act;
};

// SPEC §5
const Row kSpec[] = {
    {"kimi-k2", 7168, 2048, 384, 8, RoutingMethod::sigmoid_grouped, 1, 1, 2.827f, WeightFormat::nvfp4,
     Activation::silu},
    {"deepseek-v3", 7168, 2048, 256, 8, RoutingMethod::sigmoid_grouped, 8, 4, 2.5f, WeightFormat::nvfp4,
     Activation::silu},
    {"qwen3-235b", 4096, 1536, 128, 8, RoutingMethod::softmax, 1, 1, 1.0f, WeightFormat::nvfp4,
     Activation::silu},
    {"qwen3-30b", 2048, 768, 128, 8, RoutingMethod::softmax, 1, 1, 1.0f, WeightFormat::nvfp4,
     Activation::silu},
    {"gpt-oss-120b", 2880, 2880, 128, 4, RoutingMethod::softmax, 1, 1, 1.0f, WeightFormat::mxfp4,
     Activation::swiglu_oai},
};

TEST(Presets, MatchSpecTable) {
  ASSERT_EQ(presets().size(), std::size(kSpec));
  for (const Row& r : kSpec) {
    SCOPED_TRACE(r.name);
    const Preset* p = find_preset(r.name);
    ASSERT_NE(p, nullptr);
    EXPECT_STREQ(p->name, r.name);
    const LayerDesc& d = p->desc;
    EXPECT_EQ(d.hidden, r.H);
    EXPECT_EQ(d.intermediate, r.I);
    EXPECT_EQ(d.num_experts, r.E);
    EXPECT_EQ(d.top_k, r.k);
    EXPECT_EQ(d.weight_format, r.format);
    EXPECT_EQ(d.activation, r.act);
    EXPECT_EQ(d.act_quant, ActQuant::none);
    EXPECT_EQ(d.routing.method, r.method);
    EXPECT_TRUE(d.routing.renormalize);
    EXPECT_EQ(d.routing.routed_scaling_factor, r.scale);
    if (r.method == RoutingMethod::sigmoid_grouped) {
      EXPECT_EQ(d.routing.n_group, r.n_group);
      EXPECT_EQ(d.routing.topk_group, r.topk_group);
      EXPECT_EQ(d.num_experts % d.routing.n_group, 0);
    }
    // gpt-oss: swiglu with alpha 1.702, limit 7, and biases (SPEC §3-4)
    EXPECT_EQ(p->has_bias, r.format == WeightFormat::mxfp4);
    if (r.act == Activation::swiglu_oai) {
      EXPECT_EQ(d.swiglu_alpha, 1.702f);
      EXPECT_EQ(d.swiglu_limit, 7.0f);
    }
    // shapes every format needs: K % block for both GEMMs
    const int64_t block = r.format == WeightFormat::mxfp4 ? 32 : 16;
    EXPECT_EQ(d.hidden % block, 0);
    EXPECT_EQ(d.intermediate % block, 0);
  }
}

TEST(Presets, NamesUniqueAndUnknownIsNull) {
  std::set<std::string> names;
  for (const Preset& p : presets()) names.insert(p.name);
  EXPECT_EQ(names.size(), presets().size());
  EXPECT_EQ(find_preset("kimi"), nullptr);
  EXPECT_EQ(find_preset(""), nullptr);
  EXPECT_EQ(find_preset("KIMI-K2"), nullptr);
}

}  // namespace
}  // namespace fp4moe
