// fp4moe — the public C++ API.
//
// One MoE layer with FP4 expert weights (SPEC.md §4): describe it (LayerDesc), hand in
// the checkpoint tensors once (Layer::prepare), then call forward (standard format) or
// forward_batched (per-expert buffers) as often as you like. Forward never allocates:
// the caller passes a workspace of workspace_size() bytes. Every entry validates its
// arguments first and throws fp4moe::Error naming the argument; nothing is written
// outside the caller's output and workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp4moe {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------
enum class ErrorKind {
  invalid_argument,  // bad shape, dtype, device, stride, alignment, range, NaN weights
  unsupported,       // a valid request this build or machine cannot serve
  device,            // a CUDA runtime failure
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// ---------------------------------------------------------------------------
// Tensors: a non-owning view, shaped like a DLPack tensor.
// ---------------------------------------------------------------------------
enum class DType : uint8_t { u8, e4m3, e8m0, i32, f32, f16, bf16 };
const char* dtype_name(DType t);
size_t dtype_size(DType t);

enum class DeviceType : uint8_t { cpu, cuda };

struct TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::u8;
  int ndim = -1;                    // -1: absent (an optional argument not given)
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};    // in elements
  DeviceType device = DeviceType::cpu;
  int device_id = 0;

  bool present() const { return ndim >= 0; }
  int64_t numel() const;            // 0 with a negative extent; saturates at INT64_MAX
  bool is_contiguous() const;
  size_t nbytes() const;            // numel() x the dtype's size; saturates at SIZE_MAX
  std::string describe() const;     // "bf16[4, 7168] on cuda:0"

  // A contiguous (row-major) view.
  static TensorView of(const void* data, DType dtype, std::initializer_list<int64_t> shape,
                       DeviceType device = DeviceType::cpu, int device_id = 0);
  static TensorView of(const void* data, DType dtype, const std::vector<int64_t>& shape,
                       DeviceType device = DeviceType::cpu, int device_id = 0);
};

// ---------------------------------------------------------------------------
// What a layer is
// ---------------------------------------------------------------------------
enum class WeightFormat : uint8_t { nvfp4, mxfp4 };
enum class ActQuant : uint8_t { none, nvfp4 };        // W4A16 | W4A4 (NVFP4 weights only)
enum class Activation : uint8_t { silu, swiglu_oai };
enum class GateUpLayout : uint8_t { concat, interleaved };
enum class RoutingMethod : uint8_t { softmax, sigmoid_grouped };

const char* to_string(WeightFormat);
const char* to_string(ActQuant);
const char* to_string(Activation);
const char* to_string(GateUpLayout);
const char* to_string(RoutingMethod);

struct RoutingDesc {
  RoutingMethod method = RoutingMethod::softmax;
  bool renormalize = true;
  int n_group = 1;                  // sigmoid_grouped: groups of E / n_group experts
  int topk_group = 1;               // sigmoid_grouped: groups kept
  float routed_scaling_factor = 1.0f;
};

struct LayerDesc {
  int64_t hidden = 0;               // H
  int64_t intermediate = 0;         // I (per expert)
  int64_t num_experts = 0;          // E, global (topk_ids index this range)
  int64_t top_k = 0;                // k
  WeightFormat weight_format = WeightFormat::nvfp4;
  ActQuant act_quant = ActQuant::none;
  Activation activation = Activation::silu;
  GateUpLayout gate_up = GateUpLayout::concat;  // how w13 rows hold gate and up
  RoutingDesc routing;
  float swiglu_alpha = 1.702f;      // swiglu_oai: h = (u + 1) * g * sigmoid(alpha * g)
  float swiglu_limit = 7.0f;        // swiglu_oai: g = min(g, limit), u = clamp(u, -limit, limit)
};

// The checkpoint layout of SPEC §3 (vLLM / ModelOpt). E_local = w13.shape[0]; it equals
// num_experts unless expert_map is given. Tensors may live on the CPU or a CUDA device;
// prepare copies what it keeps, so they may be freed afterwards.
struct CheckpointWeights {
  TensorView w13;              // u8   [E_local, 2I, H/2]   gate rows [0, I), up rows [I, 2I) (or interleaved)
  TensorView w13_scale;        // e4m3 [E_local, 2I, H/16] (NVFP4) | e8m0 [E_local, 2I, H/32] (MXFP4), linear
  TensorView w13_scale_2;      // f32  [E_local] weight dq_scale (NVFP4 only)
  TensorView w2;               // u8   [E_local, H, I/2]
  TensorView w2_scale;         // e4m3 [E_local, H, I/16] | e8m0 [E_local, H, I/32]
  TensorView w2_scale_2;       // f32  [E_local]
  TensorView w13_input_scale;  // f32  [E_local] activation dq_scale (W4A4 only; the max is used)
  TensorView w2_input_scale;   // f32  [E_local]
  TensorView w13_bias;         // bf16/f32 [E_local, 2I] optional (MXFP4)
  TensorView w2_bias;          // bf16/f32 [E_local, H] optional (MXFP4)
  TensorView expert_map;       // i32  [E] global -> local index or -1; optional
};

struct PrepareOptions {
  std::string backend = "auto";     // "auto" or a backend name; FP4MOE_BACKEND overrides "auto"
  int device = -1;                  // CUDA device for GPU backends; -1: the weights' or the current one
};

// ---------------------------------------------------------------------------
// Forward arguments
// ---------------------------------------------------------------------------
struct ForwardArgs {
  TensorView hidden_states;   // [T, H] bf16 | f16 | f32 (rounded to bf16 first)
  TensorView topk_weights;    // [T, k] f32
  TensorView topk_ids;        // [T, k] i32 in [0, E) or -1 (no expert)
  TensorView out;             // [T, H] bf16 | f16 | f32, written in place (every element)
  TensorView workspace;       // u8 [>= workspace_size(T)] on the layer's device (absent if 0)
  bool apply_router_weight_on_input = false;  // only for k == 1
  bool accumulate = false;    // out += layer(x) instead of out = layer(x)
  void* stream = nullptr;     // cudaStream_t for CUDA backends
};

struct BatchedArgs {
  TensorView hidden_states;     // [E_local, M, H] bf16 | f16 | f32, or u8 [E_local, M, H/2] NVFP4 data
  TensorView hidden_scale;      // e4m3 [E_local, M, H/16] when hidden_states holds NVFP4 data (W4A4)
  TensorView expert_num_tokens; // i32 [E_local], each in [0, M]
  TensorView out;               // [E_local, M, H] bf16 | f16 | f32; rows >= count untouched
  TensorView workspace;         // u8 [>= batched_workspace_size(M)]
  void* stream = nullptr;
};

struct RouteArgs {
  TensorView router_logits;     // [T, E] f32
  TensorView correction_bias;   // [E] f32, optional (sigmoid_grouped selection bias)
  TensorView topk_weights;      // [T, k] f32 out
  TensorView topk_ids;          // [T, k] i32 out
  int64_t top_k = 0;
  RoutingDesc routing;
  void* stream = nullptr;
};

// ---------------------------------------------------------------------------
// Backends and build facts
// ---------------------------------------------------------------------------
struct BackendInfo {
  std::string name;
  DeviceType device;
  bool available;               // can run on this machine with this build
  std::string reason;           // why (not)
};
std::vector<BackendInfo> backends();

struct Selection {
  std::string backend;
  std::string reason;
};
// The selection ladder. requested: "auto" (FP4MOE_BACKEND consulted) or a name; throws
// Error(unsupported) when a named backend cannot run here or cannot serve `desc`.
Selection select_backend(const LayerDesc& desc, const std::string& requested = "auto");

struct BuildInfo {
  std::string version;
  std::vector<std::string> cuda_archs;   // compiled in, e.g. "sm_80", "sm_90a"
  int cuda_device_count = 0;
  std::vector<std::string> cuda_devices; // "NVIDIA H200 (sm_90, 132 SMs, 139 GiB)"
  // The cpu backend's SIMD level on this CPU under FP4MOE_CPU_SIMD: "avx512", "avx2" or
  // "scalar"; "unusable: <why>" when the variable asks for what cannot run.
  std::string cpu_simd;
};
BuildInfo build_info();

// ---------------------------------------------------------------------------
// The layer
// ---------------------------------------------------------------------------
namespace detail { class Backend; }

class Layer {
 public:
  static Layer prepare(const LayerDesc& desc, const CheckpointWeights& weights,
                       const PrepareOptions& options = {});
  Layer(Layer&&) noexcept;
  Layer& operator=(Layer&&) noexcept;
  ~Layer();

  const LayerDesc& desc() const;
  int64_t num_local_experts() const;
  const std::string& backend() const;
  const std::string& selection_reason() const;
  DeviceType device() const;
  int device_id() const;

  size_t workspace_size(int64_t num_tokens) const;
  size_t batched_workspace_size(int64_t max_tokens) const;

  void forward(const ForwardArgs& args) const;
  void forward_batched(const BatchedArgs& args) const;

  // Device-side checks (ids out of range, batched counts over M) cannot throw from a
  // kernel; they are recorded in the workspace and reported here (synchronises).
  void check_device_errors(const TensorView& workspace, void* stream = nullptr) const;

 private:
  explicit Layer(std::unique_ptr<detail::Backend> impl);
  std::unique_ptr<detail::Backend> impl_;
};

// Routing (SPEC §4) on the device where the logits live.
void route(const RouteArgs& args);

// ---------------------------------------------------------------------------
// Formats on tensors (SPEC §2), on the CPU or a CUDA device. A call runs where its input
// (x, data, scale, swizzled) is, and every other tensor must be on that same device
// (outputs too). CUDA tensors need a build with CUDA; their work is launched on `stream`
// (a cudaStream_t of that device; nullptr: the default stream), without allocating or
// synchronising, and is bit-identical to the CPU result (NaN outputs of dequantization
// are NaN on both; their payload and sign are the hardware's). `stream` is ignored on
// the CPU.
// ---------------------------------------------------------------------------
// x [..., K] f32|bf16|f16 -> data u8 [..., K/2], scale e4m3 [..., K/16]; q_scale = 1/dq_scale
void quantize_nvfp4(const TensorView& x, float q_scale, const TensorView& data, const TensorView& scale,
                    void* stream = nullptr);
// data u8 [..., K/2], scale e4m3 [..., K/16] -> out f32|bf16|f16 [..., K]
void dequantize_nvfp4(const TensorView& data, const TensorView& scale, float dq_scale, const TensorView& out,
                      void* stream = nullptr);
// x [..., K] -> data u8 [..., K/2], scale e8m0 [..., K/32]
void quantize_mxfp4(const TensorView& x, const TensorView& data, const TensorView& scale, void* stream = nullptr);
void dequantize_mxfp4(const TensorView& data, const TensorView& scale, const TensorView& out, void* stream = nullptr);
// scale [B..., R, C] (u8/e4m3/e8m0 bytes) <-> swizzled u8 [B..., Rp * Cp]
void swizzle_scales(const TensorView& scale, const TensorView& swizzled, void* stream = nullptr);
void unswizzle_scales(const TensorView& swizzled, const TensorView& scale, void* stream = nullptr);

const char* version();

}  // namespace fp4moe
