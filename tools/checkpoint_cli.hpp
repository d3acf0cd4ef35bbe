// `fp4moe quantize` and `fp4moe run`: the subcommands over real checkpoints
// (include/fp4moe/checkpoint.hpp, include/fp4moe/quantize_checkpoint.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace fp4moe::cli {

struct QuantizeCliOptions {
  std::string in_dir, out_dir;
  std::string format = "nvfp4";       // nvfp4 | mxfp4
  std::string layers;                 // "0,3-5"; "": every MoE layer
  std::string calibration;            // JSON {module: input amax}; "": no input_scale
};
// 0 ok, 2 error.
int run_quantize(const QuantizeCliOptions& options);

struct RunOptions {
  std::string checkpoint;
  int layer = 0;
  int64_t tokens = 16;
  std::string backend = "auto";
  std::string quant = "w4a16";        // w4a16 | w4a4 (NVFP4 checkpoints)
  bool check = false;
  uint64_t seed = 1;
};
// 0 ok, 1 check failed, 2 error.
int run_layer(const RunOptions& options);

}  // namespace fp4moe::cli
