// The fp4moe command-line tool: subcommands and their options (parsed in main.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe::cli {

struct InfoOptions {
  bool json = false;
};
int run_info(const InfoOptions& options);

struct BenchOptions {
  std::string model;                  // a preset name (SPEC §5)
  std::vector<int64_t> tokens{1, 32, 512};
  std::string backend = "auto";
  std::string quant = "w4a16";        // w4a16 | w4a4 (NVFP4 presets)
  int64_t experts = 0;                // 0: the preset's E
  int iters = 0;                      // 0: 50 on CUDA, 5 on the host
  int warmup = -1;                    // -1: 10 on CUDA, 1 on the host
  int sets = 4;                       // independent routing + activation sets, rotated
  bool skew = false;
  bool check = false;
  std::string json_path;
  uint64_t seed = 1;
};
// 0 ok (or skipped for lack of memory), 1 check failed, 2 error.
int run_bench(const BenchOptions& options);

}  // namespace fp4moe::cli
