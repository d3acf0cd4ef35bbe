// The whole standard-format layer at the fewest tokens in one kernel (decode_layer.cu): the
// grouping of the top-k slots by expert, x to GEMM 1's input, GEMM 1 with its epilogue, GEMM 2
// and the weighted combine into the caller's out, where the pipeline of pipeline.hpp runs four
// or five kernels (permute, A preparation, GEMM 1, GEMM 2, combine). Hopper (sm_90a) only.
//
// Why: at T = 1 the layer moves 19 MB (qwen3-30b) to 190 MB (kimi-k2) of weights, and the
// chain's fixed costs were a third to two thirds of it (notes v13 §6, v38 §1: ~3.7 us per
// kernel under ncu, the decode GEMMs reading 1.2 / 0.75 TB/s at qwen3-30b). Here one CTA per SM
// streams its share of both GEMMs' weights through a shared-memory ring by bulk copies (one
// producer warp), GEMM 2's first stages already in flight while GEMM 1 ends; two grid-wide
// barriers (all CTAs resident: a cooperative launch) stand where the kernel boundaries were.
//
// Measured on the H200 (notes v39, v40), T = 1 W4A16: 26-35% slower than the chain (v40:
// qwen3-30b 23.8 against 18.9 us, qwen3-235b 45.5 / 35.7, gpt-oss-120b 36.8 / 27.3, kimi-k2
// 85.6 / 69.8). Its phases, stamped per CTA (FP4MOE_LAYER_TRACE): the copies alone stream at
// the full copy rate (kimi-k2's 1.4 MB per SM in 46 us), the weight decode and MMAs alone take
// about twice that (83 us; ncu: 0.53 instructions issued per cycle and scheduler, 4.2 warps),
// and at qwen3-30b the fixed part is ~12 us of 25 (2.9 us to the units' plan, two grid barriers
// ~1 us each, h's load 0.7, the combine 1.3, the launch and memset ~4.5). So it is off by
// default (decode_layer_tokens).
//
// Results: the same values as the pipeline's (the same weight decode, epilogues, activation
// quantization and combine order); the fp32 sums of one output add their k-blocks in an order
// fixed by the shape and the SM count, so they are deterministic run to run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend.hpp"
#include "cuda/gemm.hpp"

namespace fp4moe::cuda {

// Most top-k slots (T * k) the kernel groups, and most tokens of one expert in one group (the
// MMA's n8: a ninth slot of an expert starts another group).
inline constexpr int kLayerMaxSlots = 64;
inline constexpr int kLayerGroupSlots = 8;

struct DecodeLayerArgs {
  // x (T, H), f32 | bf16 | f16, row stride x_stride elements
  const void* x = nullptr;
  DType x_dtype = DType::bf16;
  int64_t x_stride = 0;
  int64_t T = 0;
  // topk_ids / topk_weights (T, k) contiguous, on the device; expert_map (E): global -> local or -1
  const int32_t* topk_ids = nullptr;
  const float* topk_weights = nullptr;
  int64_t k = 0;
  const int32_t* expert_map = nullptr;
  int64_t E = 0;
  // apply_router_weight_on_input (k == 1): x row t times topk_weights[t] (rounded to bf16), and
  // the combine unweighted
  bool weight_on_input = false;
  // W4A4: x and h go to the GEMMs as their NVFP4 values (e2m1 x e4m3, exact in bf16) with these
  // activation dq_scales (q_scale = 1 / dq); W4A16: false
  bool w4a4 = false;
  float a13_dq = 1.0f, a2_dq = 1.0f;
  // workspace: the status word (written: kStatusBadId or 0), the grid barriers' counter (zeroed
  // by a memset before the launch), h (T * k, I) bf16, y (T * k, H) fp32
  uint32_t* status = nullptr;
  unsigned* barrier = nullptr;
  uint16_t* h = nullptr;
  float* y = nullptr;
  // out (T, H) with row stride out_stride elements; accumulate: out += the layer
  void* out = nullptr;
  DType out_dtype = DType::bf16;
  int64_t out_stride = 0;
  bool accumulate = false;
};

// Why the one-kernel layer does not run this forward ("" when it does): a device other than
// sm_90 or a build without sm_90a, the switch off, more tokens than decode_layer_tokens(), more
// than kLayerMaxSlots slots, a layer whose activations and h do not fit the shared memory next
// to a ring of kLayerMinStages stages, no cooperative launch.
std::string decode_layer_why_not(const DeviceWeights& w, int64_t T, int64_t k, bool w4a4_values);
// Its device part alone: "" on an sm_90 device with cooperative launch, in a build with sm_90a.
std::string decode_layer_why_no_device(int device);
// Runs the layer when decode_layer_why_not says "" and returns true; else false, having launched
// nothing. Arguments as DecodeLayerArgs says; the caller validated them (src/api).
bool decode_layer(const DeviceWeights& w, const DecodeLayerArgs& a, cudaStream_t stream);

// The most tokens the one-kernel layer takes: kLayerDefaultTokens (0: off, measured slower)
// unless FP4MOE_DECODE_LAYER (read once: 0 off, n up to kLayerMaxTokens) or a test's setter (-1:
// back to that) says otherwise.
inline constexpr int kLayerDefaultTokens = 0;
inline constexpr int kLayerMaxTokens = 8;
int decode_layer_tokens();
void set_decode_layer_tokens(int tokens);
// Kernels launched by decode_layer since the process started (tests: which path ran).
int64_t decode_layer_launches();

}  // namespace fp4moe::cuda
