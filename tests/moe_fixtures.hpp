// Shared test fixtures: one MoE problem generator and THE conformance table (STYLE §11)
// that every backend's tests run against the scalar reference.
//
// A problem owns every buffer; its TensorViews point into it, so it is move-only.
// Everything is a deterministic function of the case (its seed included).
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backend.hpp"
#include "fp4moe/fp4moe.hpp"

namespace fp4moe::testing {

enum class Routing {
  uniform,       // k distinct random experts per token, positive weights summing to ~1
  one_expert,    // slot 0 of every token is expert 0 (with k = 1: every token on one expert)
  skewed,        // Zipf-like expert popularity: a few hot experts, many with 0 tokens
  with_invalid,  // uniform, then ~1/4 of the slots (and every slot of token 0) are -1
  repeated,      // uniform, then slot 1 of every token names slot 0's expert again (k >= 2)
};

struct MoECase {
  std::string name;  // [A-Za-z0-9_], usable as a GoogleTest parameter name
  int64_t H = 0, I = 0, E = 0, k = 0, T = 0;
  WeightFormat wf = WeightFormat::nvfp4;
  ActQuant aq = ActQuant::none;
  Activation act = Activation::silu;
  GateUpLayout gate_up = GateUpLayout::concat;
  bool bias = false;
  int64_t E_local = 0;  // 0: = E, else an expert_map with E_local local experts
  Routing routing = Routing::uniform;
  bool router_weight_on_input = false;
  bool accumulate = false;
  uint64_t seed = 1;
  // Full-size layers: FP4 codes and block scales are drawn directly (fp32 weights of a
  // 384-expert layer would not fit in host memory next to the codes).
  bool random_codes = false;
};

// GoogleTest prints a parameter by its name.
inline void PrintTo(const MoECase& c, std::ostream* os) { *os << c.name; }

// THE conformance table. include_full_size adds full-size kimi-k2 (~9.3 GB of host memory,
// ~20 s to generate) and gpt-oss-120b (~2.8 GB) layers at T = 1 and 128, for the GPU host.
// The scalar reference of full_kimi_k2_T128 is ~45 G multiply-adds (over a minute on one
// core): compare a slice of its tokens if that is too slow.
std::vector<MoECase> conformance_cases(bool include_full_size);

// The API tests' small NVFP4 W4A16 layer: H = 64, I = 32, E = 4, k = 2, T tokens.
MoECase small_api_case(const std::string& name, int64_t T, uint64_t seed);

struct MoEProblem {
  MoECase c;
  LayerDesc desc;
  CheckpointWeights weights;                  // host TensorViews, checkpoint layout (gate_up as in c)
  std::shared_ptr<detail::HostWeights> host;  // the same weights in canonical form, built here
                                              // directly (independent of src/prepare)
  std::vector<uint16_t> x;                    // [T, H] bf16, normal-ish, std 1
  std::vector<float> topk_weights;            // [T, k]
  std::vector<int32_t> topk_ids;              // [T, k], global ids in [0, E) or -1
  std::vector<int32_t> expert_map;            // [E] or empty
  std::vector<uint16_t> out_init;             // [T, H] bf16: what out holds before an accumulate run

  // Checkpoint storage that `host` does not already hold (concat checkpoints alias host's
  // codes and scales).
  std::vector<uint8_t> ckpt_w13, ckpt_w13_scale;    // interleaved layouts only
  std::vector<uint16_t> ckpt_w13_bias, ckpt_w2_bias;  // bf16, checkpoint row order
  std::vector<float> w13_input_scale, w2_input_scale;  // [E_local], W4A4 only

  TensorView hidden_view() const;        // bf16 [T, H]
  TensorView topk_weights_view() const;  // f32 [T, k]
  TensorView topk_ids_view() const;      // i32 [T, k]

  MoEProblem() = default;
  MoEProblem(MoEProblem&&) = default;
  MoEProblem& operator=(MoEProblem&&) = default;
  MoEProblem(const MoEProblem&) = delete;  // views point into this object's buffers
  MoEProblem& operator=(const MoEProblem&) = delete;
};

MoEProblem make_problem(const MoECase& c);

// The reference output of the problem's standard forward (router weight on input and
// accumulate onto out_init as the case says), rounded to out_dtype and returned as fp32.
std::vector<float> run_reference(const MoEProblem& p, DType out_dtype = DType::bf16);

// ||got - ref|| / ||ref||; +inf if got has a NaN/Inf or the sizes differ; with ref == 0,
// 0 when got == 0 too, else +inf.
double rel_l2(const std::vector<float>& got, const std::vector<float>& ref);
float tolerance(const MoECase& c);  // 5e-4 W4A16 / MXFP4, 2e-3 W4A4
std::vector<float> bf16_to_float(const std::vector<uint16_t>& v);

}  // namespace fp4moe::testing
