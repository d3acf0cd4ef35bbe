// The MoE layers the benchmarks and tests name (SPEC §5): real model shapes with their
// routing, so that a bench or a test says "kimi-k2" instead of repeating eight numbers.
#pragma once

#include <string_view>
#include <vector>

#include "fp4moe/fp4moe.hpp"

namespace fp4moe {

struct Preset {
  const char* name;
  const char* model;        // the checkpoint the shapes come from
  LayerDesc desc;           // act_quant is none (W4A16); callers pick W4A4 for NVFP4 presets
  bool has_bias;            // the checkpoint carries w13_bias / w2_bias (gpt-oss)
};

// Every preset, in the order of SPEC §5.
const std::vector<Preset>& presets();

// nullptr when no preset has that name.
const Preset* find_preset(std::string_view name);

}  // namespace fp4moe
