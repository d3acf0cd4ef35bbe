#include "api/validate.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#if defined(FP4MOE_WITH_CUDA)
#include "cuda/common/device.hpp"
#endif

namespace fp4moe::detail {

std::string Place::name() const {
  if (any) return "cpu or cuda";
  return device == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(device_id);
}

void fail_got(std::string_view entry, std::string_view arg, const std::string& got, const std::string& need,
              ErrorKind kind) {
  std::string m;
  m.reserve(entry.size() + arg.size() + got.size() + need.size() + 16);
  m.append(entry).append(": ").append(arg).append(": got ").append(got).append(", need ").append(need);
  fail(kind, m);
}

void fail_tensor(std::string_view entry, std::string_view arg, const TensorView& t, const std::string& need,
                 ErrorKind kind) {
  fail_got(entry, arg, t.describe(), need, kind);
}

std::string spec_string(const std::vector<DType>& dtypes, const std::vector<int64_t>& shape, Place place) {
  std::string s;
  for (size_t i = 0; i < dtypes.size(); ++i) s.append(i ? "|" : "").append(dtype_name(dtypes[i]));
  s += '[';
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) s += ", ";
    s += shape[d] == kAnyExtent ? std::string("*") : std::to_string(shape[d]);
  }
  s += "] on " + place.name();
  return s;
}

void expect_present(std::string_view entry, std::string_view arg, const TensorView& t, const std::string& need) {
  if (!t.present()) fail_tensor(entry, arg, t, need);
  if (t.ndim > TensorView::kMaxDims) fail_tensor(entry, arg, t, need);
}

void expect_place(std::string_view entry, std::string_view arg, const TensorView& t, Place place,
                  const std::string& need) {
  if (place.any) {
    if (t.device != DeviceType::cpu && t.device != DeviceType::cuda) fail_tensor(entry, arg, t, need);
    return;
  }
  if (t.device != place.device) fail_tensor(entry, arg, t, need);
  if (place.device == DeviceType::cuda && t.device_id != place.device_id) fail_tensor(entry, arg, t, need);
}

void expect_contiguous(std::string_view entry, std::string_view arg, const TensorView& t, const std::string& need) {
  if (!t.is_contiguous()) fail_tensor(entry, arg, t, "a contiguous (row-major) " + need);
}

void expect_aligned(std::string_view entry, std::string_view arg, const TensorView& t, size_t alignment) {
  if (reinterpret_cast<uintptr_t>(t.data) % alignment != 0) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "%p", t.data);
    fail_got(entry, arg, t.describe() + " at " + addr,
             "a data pointer aligned to " + std::to_string(alignment) + " bytes");
  }
}

void expect_device_memory(std::string_view entry, std::string_view arg, const TensorView& t) {
#if defined(FP4MOE_WITH_CUDA)
  const std::string why = cuda::why_not_device_memory(t.data, t.nbytes(), t.device_id);
  if (why.empty()) return;
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", t.data);
  fail_got(entry, arg, t.describe() + " at " + addr + " (" + why + ")",
           "memory the kernels of cuda:" + std::to_string(t.device_id) +
               " can reach over all its bytes (its allocation, managed memory or mapped pinned host memory)");
#else
  // No CUDA in this build: no backend takes CUDA tensors (expect_place already failed them).
  fail_tensor(entry, arg, t, "a CPU tensor (this build has no CUDA)", ErrorKind::unsupported);
#endif
}

void expect_device_pointers(std::string_view entry,
                            std::initializer_list<std::pair<std::string_view, const TensorView*>> tensors) {
  for (const auto& [arg, t] : tensors)
    if (t->present() && t->device == DeviceType::cuda && t->numel() > 0) expect_device_memory(entry, arg, *t);
}

void expect_tensor(std::string_view entry, std::string_view arg, const TensorView& t,
                   const std::vector<DType>& dtypes, const std::vector<int64_t>& shape, Place place) {
  const std::string need = spec_string(dtypes, shape, place);
  expect_present(entry, arg, t, need);
  if (t.ndim != int(shape.size())) fail_tensor(entry, arg, t, need);
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) fail_tensor(entry, arg, t, need);
    if (shape[d] != kAnyExtent && t.shape[d] != shape[d]) fail_tensor(entry, arg, t, need);
  }
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= t.dtype == d;
  if (!dtype_ok) fail_tensor(entry, arg, t, need);
  // Its bytes must be countable: every size computed from its extents (a workspace's, a byte
  // range for the overlap checks) then is too.
  if (t.nbytes() > size_t(std::numeric_limits<int64_t>::max()))
    fail_tensor(entry, arg, t, need + " of at most 2^63 - 1 bytes");
  expect_place(entry, arg, t, place, need);
  expect_contiguous(entry, arg, t, need);
  if (t.numel() > 0 && t.data == nullptr) fail_got(entry, arg, t.describe() + " at a null pointer", "data");
  if (!place.any && place.device == DeviceType::cuda)
    expect_aligned(entry, arg, t, place.element_aligned ? dtype_size(t.dtype) : 16);
  else if (!place.any && t.numel() > 0)  // (prepare's tensors, Place::anywhere, are read by memcpy)
    expect_aligned(entry, arg, t, dtype_size(t.dtype));  // host: what a load of the element type needs
}

bool expect_optional(std::string_view entry, std::string_view arg, const TensorView& t,
                     const std::vector<DType>& dtypes, const std::vector<int64_t>& shape, Place place) {
  if (!t.present()) return false;
  expect_tensor(entry, arg, t, dtypes, shape, place);
  return true;
}

void expect_absent(std::string_view entry, std::string_view arg, const TensorView& t, std::string_view why) {
  if (t.present()) fail_tensor(entry, arg, t, "nothing (" + std::string(why) + ")");
}

void expect_workspace(std::string_view entry, std::string_view arg, const TensorView& t, size_t bytes,
                      Place place) {
  if (bytes == 0 && !t.present()) return;
  const std::string need = "u8[>= " + std::to_string(bytes) + "] on " + place.name();
  expect_tensor(entry, arg, t, DType::u8, {kAnyExtent}, place);
  if (size_t(t.shape[0]) < bytes) fail_tensor(entry, arg, t, need);
}

ByteRange byte_range(const TensorView& t) {
  if (!t.present() || t.numel() <= 0 || t.data == nullptr) return {};
  const auto p = reinterpret_cast<uintptr_t>(t.data);
  return {p, p + t.nbytes()};
}

void expect_disjoint(std::string_view entry, std::string_view arg_a, const TensorView& a, std::string_view arg_b,
                     const TensorView& b) {
  if (a.device != b.device || (a.device == DeviceType::cuda && a.device_id != b.device_id)) return;
  const ByteRange ra = byte_range(a), rb = byte_range(b);
  if (ra.first == ra.last || rb.first == rb.last) return;
  if (ra.first < rb.last && rb.first < ra.last)
    fail_got(entry, arg_a, a.describe() + " overlapping " + std::string(arg_b) + " (" + b.describe() + ")",
             "a buffer disjoint from " + std::string(arg_b));
}

std::string index_string(const TensorView& t, int64_t flat) {
  int64_t idx[TensorView::kMaxDims] = {};
  for (int d = t.ndim - 1; d >= 0; --d) {
    const int64_t n = t.shape[d] > 0 ? t.shape[d] : 1;
    idx[d] = flat % n;
    flat /= n;
  }
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

}  // namespace fp4moe::detail

namespace fp4moe::detail {
void expect_routing(std::string_view entry, std::string_view prefix, const RoutingDesc& r, int64_t E, int64_t k) {
  const std::string p(prefix);
  if (r.method != RoutingMethod::softmax && r.method != RoutingMethod::sigmoid_grouped)
    fail_got(entry, p + ".method", std::to_string(int(r.method)), "softmax or sigmoid_grouped");
  if (!std::isfinite(r.routed_scaling_factor))
    fail_got(entry, p + ".routed_scaling_factor", std::to_string(r.routed_scaling_factor), "a finite value");
  if (r.method != RoutingMethod::sigmoid_grouped) return;  // softmax ignores the groups
  if (r.n_group < 1 || E % r.n_group != 0)
    fail_got(entry, p + ".n_group", std::to_string(r.n_group),
             "a divisor of the " + std::to_string(E) + " experts");
  if (r.topk_group < 1 || r.topk_group > r.n_group)
    fail_got(entry, p + ".topk_group", std::to_string(r.topk_group),
             "a value in [1, n_group = " + std::to_string(r.n_group) + "]");
  const int64_t reachable = int64_t(r.topk_group) * (E / r.n_group);
  if (k > reachable)
    fail_got(entry, "top_k", std::to_string(k),
             "at most topk_group * E / n_group = " + std::to_string(reachable) + " experts in the kept groups");
}
}  // namespace fp4moe::detail
