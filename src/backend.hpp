// The internal contract between the public API (src/api), the selection ladder
// (src/select) and each backend (src/reference, src/cuda, ...).
//
// Flow: Layer::prepare validates the checkpoint tensors (src/prepare) into HostWeights,
// select_backend picks a BackendEntry, entry.adopt (where there is one) reorders the codes
// in place, entry.create turns HostWeights into the backend's private layout. Layer::forward
// validates ForwardArgs against the layer and the backend's device, then calls
// Backend::forward with arguments already checked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp4moe/fp4moe.hpp"
#include "prepare/host_bytes.hpp"

namespace fp4moe::detail {

// The order of the e2m1 codes inside each row of w13 and w2: canonical (SPEC §3), or the CPU
// backend's (src/cpu/cpu_codes.hpp), which Layer::prepare has it take over in place.
enum class CodeLayout { canonical, cpu };

// Checkpoint weights after validation, on the host, in the canonical layout of SPEC §3
// with gate/up concatenated (interleaved checkpoints are de-interleaved by prepare), the codes
// inside each row as `codes` says. The packed weights and scales are HostBytes: prepare fills
// them in parallel (host_bytes.hpp).
struct HostWeights {
  LayerDesc desc;
  CodeLayout codes = CodeLayout::canonical;  // inside the rows of w13 and w2
  int64_t num_local = 0;               // E_local
  int block = 16;                      // 16 (NVFP4, e4m3 scales) or 32 (MXFP4, e8m0 scales)
  HostBytes w13;                       // (E_local, 2I, H/2)   gate rows [0, I), up rows [I, 2I)
  HostBytes w13_scale;                 // (E_local, 2I, H/block) linear
  std::vector<float> w13_dq;           // (E_local) weight dq_scale; 1 for MXFP4
  HostBytes w2;                        // (E_local, H, I/2)
  HostBytes w2_scale;                  // (E_local, H, I/block)
  std::vector<float> w2_dq;            // (E_local)
  float a13_dq = 1.0f;                 // W4A4: activation dq_scale of GEMM 1 (max over experts)
  float a2_dq = 1.0f;                  // W4A4: activation dq_scale of GEMM 2
  std::vector<float> w13_bias;         // (E_local, 2I) concat order, or empty
  std::vector<float> w2_bias;          // (E_local, H) or empty
  std::vector<int32_t> expert_map;     // (E) global -> local or -1; identity when not given

  int64_t H() const { return desc.hidden; }
  int64_t I() const { return desc.intermediate; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  LayerDesc desc;
  int64_t num_local = 0;
  std::string name;
  std::string reason;                  // why the ladder chose it
  DeviceType device = DeviceType::cpu;
  int device_id = 0;

  virtual size_t workspace_size(int64_t num_tokens) const = 0;
  virtual size_t batched_workspace_size(int64_t max_tokens) const = 0;
  // Arguments are validated by the caller (src/api): shapes, dtypes, devices, ranges
  // of host-visible ids and counts.
  virtual void forward(const ForwardArgs& args) const = 0;
  virtual void forward_batched(const BatchedArgs& args) const = 0;
  virtual void check_device_errors(const TensorView& /*workspace*/, void* /*stream*/) const {}
};

struct BackendEntry {
  const char* name;
  DeviceType device;
  // "" when this backend can run on this machine with this build, else why not.
  std::string (*why_not_here)();
  // "" when it serves this layer, else why not.
  std::string (*why_not_for)(const LayerDesc& desc);
  // Why the ladder picks it (when it does).
  const char* why_chosen;
  std::unique_ptr<Backend> (*create)(std::shared_ptr<const HostWeights> weights,
                                     const PrepareOptions& options);
  // nullptr, or: rewrites weights that only this backend will hold into its own code layout, in
  // place (Layer::prepare, between prepare_host_weights and create), so that create needs no
  // second copy of the packed weights.
  void (*adopt)(HostWeights& weights) = nullptr;
};

// The cpu backend's SIMD level here ("amx", "avx512", "avx2" or "scalar"), as FP4MOE_CPU_SIMD selects
// it; throws Error(invalid_argument) naming the variable for a bad value (src/cpu).
std::string cpu_simd_level();

// The ladder, best first (src/select/registry.cpp).
const std::vector<BackendEntry>& registry();

// Each backend's entry (defined next to the backend).
BackendEntry cpu_backend_entry();
BackendEntry reference_backend_entry();
#if defined(FP4MOE_WITH_CUDA)
BackendEntry cuda_backend_entry();
#endif

// Throwing helpers with the SPEC §6 message shape: "<arg>: got <x>, need <y>".
[[noreturn]] void fail(ErrorKind kind, const std::string& message);
[[noreturn]] inline void fail_arg(const std::string& message) { fail(ErrorKind::invalid_argument, message); }

}  // namespace fp4moe::detail
