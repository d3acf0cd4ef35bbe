// Synthetic checkpoints for the benchmark: packed e2m1 codes and block scales drawn
// directly (no bf16 weights ever exist), deterministic per (seed, expert) so that any
// subset of experts can be regenerated bit-identically later (the --check oracle). The
// packed bytes are HostBytes: the generating threads' writes are their pages' first touch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp4moe/fp4moe.hpp"
#include "prepare/host_bytes.hpp"

namespace fp4moe::cli {

// splitmix64: one 64-bit state, fast, and good enough for benchmark data.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return uint32_t((next() >> 32) * n >> 32); }   // [0, n)
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }      // [0, 1)
  float normal();                                                              // N(0, 1)
};

// A seed for stream `what` of expert `e`: streams never overlap between experts.
uint64_t stream_seed(uint64_t seed, int64_t e, uint64_t what);

// A checkpoint in the SPEC §3 layout for the experts `experts` (global ids) of `desc`.
struct Synthetic {
  LayerDesc desc;
  std::vector<int32_t> experts;       // (E_local) global id of each local expert
  detail::HostBytes w13;              // (E_local, 2I, H/2) u8, two e2m1 per byte, low nibble first
  detail::HostBytes w13_scale;        // (E_local, 2I, H/block) e4m3 (NVFP4) | e8m0 (MXFP4), linear
  std::vector<float> w13_scale_2;     // (E_local) NVFP4 weight dq_scale
  detail::HostBytes w2;               // (E_local, H, I/2)
  detail::HostBytes w2_scale;         // (E_local, H, I/block)
  std::vector<float> w2_scale_2;      // (E_local)
  std::vector<float> w13_input_scale; // (E_local) W4A4 activation dq_scale, same for all
  std::vector<float> w2_input_scale;  // (E_local)
  std::vector<uint16_t> w13_bias;     // (E_local, 2I) bf16, MXFP4 presets with biases
  std::vector<uint16_t> w2_bias;      // (E_local, H) bf16
  std::vector<int32_t> expert_map;    // (E) global -> local or -1, only for a subset

  // Views for Layer::prepare; expert_map is given only when this is a subset.
  CheckpointWeights view() const;
};

struct SynthOptions {
  bool biases = false;                 // generate w13_bias / w2_bias (MXFP4)
  float a13_dq = 1.0f, a2_dq = 1.0f;   // W4A4 input scales to store
  bool progress = false;               // a progress line on stderr past ~2 s
};

// Bytes of one expert's w13 + w2 with their block scales (what a forward streams per
// touched expert).
size_t expert_weight_bytes(const LayerDesc& desc, bool biases);

// Generates `experts` (all of [0, E) when empty), multithreaded over experts.
Synthetic make_synthetic(const LayerDesc& desc, uint64_t seed, const std::vector<int32_t>& experts,
                         const SynthOptions& options);

// W4A4: activation dq_scale of GEMM 2, calibrated the way ModelOpt does (amax of the
// intermediate over a calibration set / (6*448)) on `tokens` rows of x (T, H) bf16 through
// the first `n_experts` experts of `s`, with a 1.25 margin because the sample is small.
float calibrate_a2_dq(const Synthetic& s, const std::vector<uint16_t>& x, int64_t tokens, int n_experts);

// Prints "label  42%  3.1/7.4 GB  ETA 5 s" on stderr, overwriting itself, once more than
// ~2 s have passed; finish() ends the line.
class Progress {
 public:
  Progress(std::string label, double total_units, const char* unit, bool enabled);
  void update(double done);
  void finish();

 private:
  std::string label_;
  double total_;
  const char* unit_;
  bool enabled_, shown_ = false;
  double start_, last_ = 0;
};

}  // namespace fp4moe::cli
