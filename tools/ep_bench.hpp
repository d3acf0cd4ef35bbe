// `fp4moe ep-bench`: the EP layer on every visible GPU against the single-GPU layer
// (tools/ep_bench.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp4moe::cli {

struct EpBenchOptions {
  std::string model;                    // a preset name (SPEC §5)
  std::vector<int64_t> tokens{1, 16, 128, 1024, 4096};  // tokens per rank
  std::string mode = "both";            // a2a | allreduce | both
  std::string quant = "w4a16";          // w4a16 | w4a4 (NVFP4 presets)
  std::string dispatch = "bf16";        // bf16 | nvfp4 (W4A4)
  std::string combine = "f32";          // f32 | bf16
  int64_t experts = 0;                  // 0: the preset's E
  int gpus = 0;                         // 0: every visible GPU
  // a2a capacities = this factor x the rows the bench's routing actually needs (>= 1 never
  // overflows); 0: the library's defaults, which never overflow for any routing but size
  // the slabs for the worst case
  double capacity_factor = 1.0;
  int iters = 0;                        // 0: 20
  int warmup = -1;                      // -1: 5
  bool check = true;                    // rank 0's output against the single-GPU layer
  std::string json_path;
  uint64_t seed = 1;
};
// 0 ok (or skipped: fewer than 2 GPUs, no NCCL), 1 check failed or overflow, 2 error.
int run_ep_bench(const EpBenchOptions& options);

}  // namespace fp4moe::cli
