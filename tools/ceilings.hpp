// The two ceilings a MoE layer's time is judged against, measured in the same process as
// the layer: how fast this GPU moves bytes (a large device-to-device copy) and how fast it
// multiplies (a large cuBLAS bf16 GEMM with fp32 accumulation). The bench's floor for one
// forward is max(bytes / copy rate, flops / GEMM rate).
#pragma once

#include <string>
#include <vector>

namespace fp4moe::cli {

struct Ceilings {
  bool copy_ok = false, gemm_ok = false;
  std::string note;               // why a ceiling is missing, or what was scaled down

  size_t copy_bytes = 0;          // bytes of one cudaMemcpyAsync (read once, written once)
  std::vector<double> copy_us;    // each timed copy
  double copy_bytes_per_s = 0;    // 2 * copy_bytes / median time, the fastest of the three ways
  double copy_memcpy_bytes_per_s = 0, copy_kernel_bytes_per_s = 0, copy_streaming_bytes_per_s = 0;  // each way
  std::string copy_how;           // which way was fastest

  int gemm_n = 0;                 // M = N = K
  std::vector<double> gemm_us;
  double gemm_flops_per_s = 0;    // 2 * n^3 / median time
  // The same GEMM after kGemmSustainS of back-to-back products: the rate at the power cap a
  // long compute-bound run settles at (the H200 at 700 W: SM clock 1.2-1.5 GHz, where the short
  // run sees 1.98). The floor keeps the short rate; the JSON rows also carry the sustained one.
  bool gemm_sustained_ok = false;
  double gemm_sustained_warm_s = 0;  // seconds of products run before the timed ones
  std::vector<double> gemm_sustained_us;
  double gemm_sustained_flops_per_s = 0;
  std::string cublas;             // library and version that ran the GEMM
};

// Measures both on `device` (median of `iters` CUDA-graph replays after a warmup). Never
// throws: a missing cuBLAS or too little memory leaves that ceiling out, with a note.
Ceilings measure_ceilings(int device, int iters);

}  // namespace fp4moe::cli
