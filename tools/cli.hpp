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
  int check = -1;                     // 1 --check, 0 --no-check, -1 auto: on unless --all or > 4 counts
  std::string json_path;
  uint64_t seed = 1;
  bool all = false;                   // every preset and quantization (also --model all)
  bool tokens_given = false;          // --tokens was on the command line (--all has its own default)
  bool baseline = true;               // time the bf16 cuBLAS baseline (GPU only)
  bool ceilings = true;               // measure the copy and GEMM ceilings (GPU only; off: no floor)
  int copies = 0;                     // weight copies rotated; 0: enough to exceed 4 x L2
  bool routing_only = false;          // the routing's experts touched per token count, then stop
  bool nodes = false;                 // also time each node of the forward's CUDA graph in place
  int rest_us = 0;                    // with nodes: the GPU idles this long before each of those replays
  int layers = 1;                     // layer calls per timed CUDA graph (time_cuda's per_graph; CUDA only)
  double warmup_ms = -1;              // untimed replays after the warmup for this many ms; < 0: 2000 on CUDA, 0 on host
  double zero_tokens = 0;             // this fraction of the tokens' hidden states zero (a probe of the data's power)
};
// 0 ok (or skipped for lack of memory), 1 check failed, 2 error.
int run_bench(const BenchOptions& options);

}  // namespace fp4moe::cli
