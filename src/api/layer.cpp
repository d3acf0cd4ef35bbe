// Layer: prepare = validate the checkpoint (src/prepare) -> choose a backend
// (src/select) -> let it build its layout. forward / forward_batched check every
// argument against the layer and the backend's device (SPEC §6) before the backend
// sees them, so a failing call writes nothing.
#include <string>

#include "api/validate.hpp"
#include "fp4moe/format.h"
#include "prepare/prepare.hpp"

namespace fp4moe {
namespace {

using detail::expect_disjoint;
using detail::expect_tensor;
using detail::expect_workspace;
using detail::fail_got;
using detail::Place;

const std::vector<DType> kFloat = {DType::bf16, DType::f16, DType::f32};

Place place_of(const detail::Backend& b) {
  return b.device == DeviceType::cpu ? Place::cpu() : Place::cuda(b.device_id);
}

}  // namespace

Layer::Layer(std::unique_ptr<detail::Backend> impl) : impl_(std::move(impl)) {}
Layer::Layer(Layer&&) noexcept = default;
Layer& Layer::operator=(Layer&&) noexcept = default;
Layer::~Layer() = default;

Layer Layer::prepare(const LayerDesc& desc, const CheckpointWeights& weights, const PrepareOptions& options) {
  detail::validate_desc("Layer::prepare", desc);
  const Selection sel = select_backend(desc, options.backend);
  const detail::BackendEntry* entry = nullptr;
  for (const detail::BackendEntry& e : detail::registry())
    if (sel.backend == e.name) entry = &e;
  if (!entry) detail::fail(ErrorKind::unsupported, "Layer::prepare: selected backend '" + sel.backend + "' is not built");

  std::shared_ptr<detail::HostWeights> host = detail::prepare_host_weights(desc, weights);
  if (entry->adopt) entry->adopt(*host);  // the backend's own code layout, in place: host is its alone
  PrepareOptions opts = options;
  if (opts.device < 0 && weights.w13.device == DeviceType::cuda) opts.device = weights.w13.device_id;
  std::unique_ptr<detail::Backend> impl = entry->create(std::move(host), opts);
  if (!impl) detail::fail(ErrorKind::device, "Layer::prepare: backend '" + sel.backend + "' returned no layer");
  if (impl->name.empty()) impl->name = entry->name;
  impl->reason = sel.reason;
  return Layer(std::move(impl));
}

// A moved-from Layer has no backend; using it is a caller error, not a crash.
static const detail::Backend& backend_of(const std::unique_ptr<detail::Backend>& impl, const char* entry) {
  if (!impl) detail::fail_arg(std::string(entry) + ": this Layer was moved from; need a prepared Layer");
  return *impl;
}

const LayerDesc& Layer::desc() const { return backend_of(impl_, "Layer::desc").desc; }
int64_t Layer::num_local_experts() const { return backend_of(impl_, "Layer::num_local_experts").num_local; }
const std::string& Layer::backend() const { return backend_of(impl_, "Layer::backend").name; }
const std::string& Layer::selection_reason() const { return backend_of(impl_, "Layer::selection_reason").reason; }
DeviceType Layer::device() const { return backend_of(impl_, "Layer::device").device; }
int Layer::device_id() const { return backend_of(impl_, "Layer::device_id").device_id; }

size_t Layer::workspace_size(int64_t num_tokens) const {
  const detail::Backend& b = backend_of(impl_, "Layer::workspace_size");
  if (num_tokens < 0) fail_got("Layer::workspace_size", "num_tokens", std::to_string(num_tokens), ">= 0");
  return b.workspace_size(num_tokens);
}

size_t Layer::batched_workspace_size(int64_t max_tokens) const {
  const detail::Backend& b = backend_of(impl_, "Layer::batched_workspace_size");
  if (max_tokens < 0) fail_got("Layer::batched_workspace_size", "max_tokens", std::to_string(max_tokens), ">= 0");
  return b.batched_workspace_size(max_tokens);
}

void Layer::forward(const ForwardArgs& a) const {
  constexpr const char* kEntry = "Layer::forward";
  const detail::Backend& b = backend_of(impl_, kEntry);
  const Place at = place_of(b);
  const int64_t H = b.desc.hidden, E = b.desc.num_experts, k = b.desc.top_k;

  expect_tensor(kEntry, "hidden_states", a.hidden_states, kFloat, {detail::kAnyExtent, H}, at);
  const int64_t T = a.hidden_states.shape[0];
  expect_tensor(kEntry, "topk_weights", a.topk_weights, DType::f32, {T, k}, at);
  expect_tensor(kEntry, "topk_ids", a.topk_ids, DType::i32, {T, k}, at);
  expect_tensor(kEntry, "out", a.out, kFloat, {T, H}, at);
  expect_workspace(kEntry, "workspace", a.workspace, b.workspace_size(T), at);
  if (a.apply_router_weight_on_input && k != 1)
    fail_got(kEntry, "apply_router_weight_on_input", "true with top_k = " + std::to_string(k), "top_k == 1");

  // out is written while the others are still read (and the workspace while out is).
  expect_disjoint(kEntry, "out", a.out, "hidden_states", a.hidden_states);
  expect_disjoint(kEntry, "out", a.out, "workspace", a.workspace);
  expect_disjoint(kEntry, "out", a.out, "topk_weights", a.topk_weights);
  expect_disjoint(kEntry, "out", a.out, "topk_ids", a.topk_ids);
  expect_disjoint(kEntry, "workspace", a.workspace, "hidden_states", a.hidden_states);
  expect_disjoint(kEntry, "workspace", a.workspace, "topk_weights", a.topk_weights);
  expect_disjoint(kEntry, "workspace", a.workspace, "topk_ids", a.topk_ids);

  // Ids on the host are checked here; a CUDA backend checks them on the device and
  // reports through check_device_errors.
  if (at.device == DeviceType::cpu) {
    const auto* ids = static_cast<const int32_t*>(a.topk_ids.data);
    for (int64_t i = 0; i < T * k; ++i)
      if (ids[i] < -1 || ids[i] >= E)
        fail_got(kEntry, "topk_ids", std::to_string(ids[i]) + " at " + detail::index_string(a.topk_ids, i),
                 "-1 or an expert in [0, " + std::to_string(E) + ")");
  }
  if (T == 0) return;
  detail::expect_device_pointers(kEntry, {{"hidden_states", &a.hidden_states},
                                          {"topk_weights", &a.topk_weights},
                                          {"topk_ids", &a.topk_ids},
                                          {"out", &a.out},
                                          {"workspace", &a.workspace}});
  b.forward(a);
}

void Layer::forward_batched(const BatchedArgs& a) const {
  constexpr const char* kEntry = "Layer::forward_batched";
  const detail::Backend& b = backend_of(impl_, kEntry);
  const Place at = place_of(b);
  const int64_t H = b.desc.hidden, EL = b.num_local;
  const bool w4a4 = b.desc.act_quant == ActQuant::nvfp4;

  const TensorView& x = a.hidden_states;
  int64_t M = 0;
  if (x.present() && x.dtype == DType::u8 && w4a4) {  // NVFP4 activations: data + e4m3 scales
    expect_tensor(kEntry, "hidden_states", x, DType::u8, {EL, detail::kAnyExtent, H / 2}, at);
    M = x.shape[1];
    expect_tensor(kEntry, "hidden_scale", a.hidden_scale, {DType::e4m3, DType::u8}, {EL, M, H / kNvfp4Block}, at);
  } else {
    const std::vector<int64_t> shape = {EL, detail::kAnyExtent, H};
    if (x.present() && x.dtype == DType::u8)
      detail::fail_tensor(kEntry, "hidden_states", x,
                          detail::spec_string(kFloat, shape, at) + " (u8 NVFP4 data only for W4A4 layers)");
    expect_tensor(kEntry, "hidden_states", x, kFloat, shape, at);
    M = x.shape[1];
    detail::expect_absent(kEntry, "hidden_scale", a.hidden_scale, "hidden_states holds no NVFP4 data");
  }
  expect_tensor(kEntry, "expert_num_tokens", a.expert_num_tokens, DType::i32, {EL}, at);
  expect_tensor(kEntry, "out", a.out, kFloat, {EL, M, H}, at);
  expect_workspace(kEntry, "workspace", a.workspace, b.batched_workspace_size(M), at);

  expect_disjoint(kEntry, "out", a.out, "hidden_states", x);
  expect_disjoint(kEntry, "out", a.out, "hidden_scale", a.hidden_scale);
  expect_disjoint(kEntry, "out", a.out, "expert_num_tokens", a.expert_num_tokens);
  expect_disjoint(kEntry, "out", a.out, "workspace", a.workspace);
  expect_disjoint(kEntry, "workspace", a.workspace, "hidden_states", x);
  expect_disjoint(kEntry, "workspace", a.workspace, "hidden_scale", a.hidden_scale);
  expect_disjoint(kEntry, "workspace", a.workspace, "expert_num_tokens", a.expert_num_tokens);

  if (at.device == DeviceType::cpu) {
    const auto* counts = static_cast<const int32_t*>(a.expert_num_tokens.data);
    for (int64_t e = 0; e < EL; ++e) {
      const std::string at_e = "expert_num_tokens[" + std::to_string(e) + "] = " + std::to_string(counts[e]);
      if (counts[e] < 0) detail::fail_arg(std::string(kEntry) + ": " + at_e + " is negative; need a count in [0, " +
                                          std::to_string(M) + "]");
      if (counts[e] > M)
        detail::fail_arg(std::string(kEntry) + ": " + at_e + " is above max_tokens " + std::to_string(M) +
                         "; need a count in [0, " + std::to_string(M) + "]");
    }
  }
  if (M == 0) return;
  detail::expect_device_pointers(kEntry, {{"hidden_states", &x},
                                          {"hidden_scale", &a.hidden_scale},
                                          {"expert_num_tokens", &a.expert_num_tokens},
                                          {"out", &a.out},
                                          {"workspace", &a.workspace}});
  b.forward_batched(a);
}

void Layer::check_device_errors(const TensorView& workspace, void* stream) const {
  constexpr const char* kEntry = "Layer::check_device_errors";
  const detail::Backend& b = backend_of(impl_, kEntry);
  if (workspace.present()) {
    expect_tensor(kEntry, "workspace", workspace, DType::u8, {detail::kAnyExtent}, place_of(b));
    detail::expect_device_pointers(kEntry, {{"workspace", &workspace}});
  }
  b.check_device_errors(workspace, stream);
}

}  // namespace fp4moe
