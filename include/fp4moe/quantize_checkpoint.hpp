// fp4moe/quantize_checkpoint.hpp — quantize the experts of a bf16/fp16/f32 MoE checkpoint
// into the ModelOpt unified HF layout (what vLLM, SGLang and TensorRT-LLM load, and what
// load_moe_layer reads). The library side of `fp4moe quantize`.
//
// Input: a checkpoint directory (config.json + safetensors) with experts named
//   model.layers.{L}.mlp.experts.{e}.{gate,up,down}_proj.weight          (Qwen3-MoE, DeepSeek, Kimi)
//   model.layers.{L}.block_sparse_moe.experts.{e}.{w1,w3,w2}.weight      (Mixtral; w1 gate, w3 up, w2 down)
// each [out, in] in BF16, F16 or F32.
//
// Output (one shard per input shard, same file names, layer by layer with bounded memory):
//   P.weight          U8      [out, in/2]   two e2m1 per byte, low nibble first
//   P.weight_scale    F8_E4M3 [out, in/16]  (MXFP4: F8_E8M0 [out, in/32])
//   P.weight_scale_2  F32     []            NVFP4 weight dq_scale = amax / (6*448); gate and
//                                           up of one expert share one (amax over both)
//   P.input_scale     F32     []            activation dq_scale = amax / (6*448), only when
//                                           the calibration file gives that input's amax
// every other tensor copied byte for byte; hf_quant_config.json
// {"producer": {"name": "modelopt", ...}, "quantization": {"quant_algo": "NVFP4",
// "group_size": 16, "exclude_modules": [every linear left unquantized]}}, and the same
// section as "quantization_config" (quant_method "modelopt") in config.json.
//
// Calibration file (JSON object; amax = the largest |value| of the linear's input seen on
// calibration data, a finite positive number):
//   {"model.layers.0.mlp.experts.3.gate_proj": 12.5,   // one expert's linear
//    "model.layers.0.mlp.experts.*.down_proj": 40.0}   // every expert of that layer
// An exact expert key wins over the layer's "*" key. gate and up read the same input, so
// both get the larger of their two amaxes. Linears without an amax get no input_scale, and
// W4A4 on such a layer refuses, naming the missing input_scale.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fp4moe/fp4moe.hpp"

namespace fp4moe {

struct QuantizeOptions {
  WeightFormat format = WeightFormat::nvfp4;
  std::vector<int> layers;           // MoE layers to quantize; empty: every layer with experts
  std::string calibration;           // path of the calibration JSON; "": no input_scale
  // Called after each tensor with (input bytes done, input bytes in all).
  std::function<void(double done, double total)> progress;
};

struct QuantizeReport {
  std::vector<int> layers;           // layers whose experts were quantized, ascending
  int64_t linears = 0;               // expert linears quantized
  int64_t calibrated = 0;            // of which got an input_scale
  int64_t copied = 0;                // tensors copied as they are
  std::vector<std::string> files;    // output .safetensors written
};

// Quantizes in_dir into out_dir (created if needed; must not be in_dir). Throws
// fp4moe::Error naming the file and tensor on bad input (non-float experts, in not a
// multiple of the block, NaN/Inf weights, missing gate/up partner, bad calibration).
QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                   const QuantizeOptions& options = {});

// "0,3-5" -> {0, 3, 4, 5}; throws naming `what` on anything else.
std::vector<int> parse_layer_list(const std::string& text, const std::string& what = "--layers");

}  // namespace fp4moe
