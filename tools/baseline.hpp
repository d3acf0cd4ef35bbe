// The MoE a user would otherwise run: the same experts dequantized once to bf16, the same
// routing (top-k ids and weights as the layer got them), a permutation, cuBLAS grouped
// GEMMs (cublasGemmGroupedBatchedEx, bf16 in and out, fp32 accumulation) for gate/up and
// down, the gated activation and the weighted combine (tools/baseline.cu).
//
// The group sizes are read on the host from the routing the device produced, before
// capture, so the baseline never pays the device-to-host sync a real grouped-GEMM MoE
// needs for them: its time is a lower bound on that path's, and the speed-up over it is
// conservative.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp4moe/fp4moe.hpp"
#include "synth.hpp"

namespace fp4moe::cli {

// One routing to replay: device views of the inputs and output the layer also uses.
struct BaselineVariant {
  const int32_t* host_ids = nullptr;  // (T, k) the same ids as `ids`, on the host
  TensorView ids, weights, hidden;    // (T, k) i32, (T, k) f32, (T, H) bf16 on the GPU
  int copy = 0;                       // which bf16 weight copy this replay reads
};

class Bf16Baseline {
 public:
  // Dequantizes every expert of `ckpt` (all E of its desc) to bf16 on `device`, `copies`
  // times when memory allows (fewer otherwise, at least one), keeping `reserve_bytes` of
  // GPU memory free for the rest of the run. nullptr, with *why, when it cannot run here:
  // no CUDA, no cuBLAS >= 12.5, E > 1024, or not enough memory for one copy.
  static std::unique_ptr<Bf16Baseline> create(const Synthetic& ckpt, int device, int copies, size_t reserve_bytes,
                                              std::string* why);
  ~Bf16Baseline();

  // bf16 w13 + w2 (and biases) of one expert: what a forward streams per touched expert.
  static size_t expert_bytes(const LayerDesc& desc, bool biases);
  int copies() const;

  // Workspace for T tokens and one replay per variant (replacing earlier ones). Throws
  // fp4moe::Error on a CUDA failure.
  void set_variants(int64_t T, const std::vector<BaselineVariant>& variants);
  // One forward of variant v on `stream` (cudaStream_t): sort, gather, GEMM 1, act, GEMM 2,
  // combine into the baseline's own output (T, H) bf16.
  void run(int v, void* stream) const;
  // The output of the last run, synchronised, as bf16 bits.
  std::vector<uint16_t> output() const;

  Bf16Baseline(const Bf16Baseline&) = delete;
  Bf16Baseline& operator=(const Bf16Baseline&) = delete;

 private:
  struct Impl;
  explicit Bf16Baseline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4moe::cli
