// Argument checks for public entries, one line per argument, each failing with the
// SPEC §6 message shape
//     "<entry>: <arg>: got <what was passed>, need <what is required>"
// and ErrorKind::invalid_argument. All checks of a call run before anything is
// written, so a failing call leaves every caller buffer untouched.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend.hpp"

namespace fp4moe::detail {

// Where the tensors of a call must live.
struct Place {
  DeviceType device = DeviceType::cpu;
  int device_id = 0;
  bool any = false;  // any device (prepare copies what it keeps to the host)
  // CUDA data pointers must be 16-byte aligned (vector loads) unless this is set; then
  // their element size is enough (kernels that vectorise only where a pointer allows).
  bool element_aligned = false;

  static Place cpu() { return {DeviceType::cpu, 0, false}; }
  static Place cuda(int id) { return {DeviceType::cuda, id, false}; }
  static Place anywhere() { return {DeviceType::cpu, 0, true}; }
  static Place of(const TensorView& t) { return {t.device, t.device_id, false}; }
  std::string name() const;  // "cpu", "cuda:1", "cpu or cuda"
};

inline constexpr int64_t kAnyExtent = -1;

// "<entry>: <arg>: got <got>, need <need>"
[[noreturn]] void fail_got(std::string_view entry, std::string_view arg, const std::string& got,
                           const std::string& need, ErrorKind kind = ErrorKind::invalid_argument);
[[noreturn]] void fail_tensor(std::string_view entry, std::string_view arg, const TensorView& t,
                              const std::string& need, ErrorKind kind = ErrorKind::invalid_argument);

// "bf16|f16|f32[4, 7168] on cuda:0" (kAnyExtent prints as "*")
std::string spec_string(const std::vector<DType>& dtypes, const std::vector<int64_t>& shape, Place place);

// A CUDA tensor's data pointer must be memory its device's kernels can reach
// (cuda::why_not_device_memory): a host buffer labelled cuda fails here, naming the argument,
// instead of faulting in a kernel. It is a CUDA call, so the entries run it after all their other
// checks: expect_device_pointers over their CUDA tensors before their first launch; prepare on
// each CUDA checkpoint tensor before it copies.
void expect_device_memory(std::string_view entry, std::string_view arg, const TensorView& t);
// expect_device_memory for each present CUDA tensor with elements, in the order given.
void expect_device_pointers(std::string_view entry,
                            std::initializer_list<std::pair<std::string_view, const TensorView*>> tensors);

// The full check of one required tensor argument, in this order: present, dims and
// extents (their bytes countable in int64), dtype, device, contiguous, non-null data when it
// has elements, and on CUDA a 16-byte aligned data pointer (vector loads rely on it;
// Place::element_aligned relaxes this to the element size), on the host one aligned to its
// element size (a misaligned f32 was read as such: undefined, UBSan, v65); anywhere
// (Place::any: prepare's checkpoint tensors, which it reads by memcpy) no alignment.
void expect_tensor(std::string_view entry, std::string_view arg, const TensorView& t,
                   const std::vector<DType>& dtypes, const std::vector<int64_t>& shape, Place place);
inline void expect_tensor(std::string_view entry, std::string_view arg, const TensorView& t, DType dtype,
                          const std::vector<int64_t>& shape, Place place) {
  expect_tensor(entry, arg, t, std::vector<DType>{dtype}, shape, place);
}
// Same, but an absent tensor passes. Returns whether it is present.
bool expect_optional(std::string_view entry, std::string_view arg, const TensorView& t,
                     const std::vector<DType>& dtypes, const std::vector<int64_t>& shape, Place place);
// The tensor must not be given; `why` completes "need nothing (...)".
void expect_absent(std::string_view entry, std::string_view arg, const TensorView& t, std::string_view why);

// The pieces expect_tensor is made of, for callers that need them alone.
void expect_present(std::string_view entry, std::string_view arg, const TensorView& t, const std::string& need);
void expect_place(std::string_view entry, std::string_view arg, const TensorView& t, Place place,
                  const std::string& need);
void expect_contiguous(std::string_view entry, std::string_view arg, const TensorView& t, const std::string& need);
void expect_aligned(std::string_view entry, std::string_view arg, const TensorView& t, size_t alignment);

// A u8 1-D workspace of at least `bytes` bytes on `place`; may be absent when bytes == 0.
void expect_workspace(std::string_view entry, std::string_view arg, const TensorView& t, size_t bytes,
                      Place place);

// The byte ranges of two tensors on the same device must be disjoint (absent or
// empty tensors overlap nothing). Message names both.
void expect_disjoint(std::string_view entry, std::string_view arg_a, const TensorView& a, std::string_view arg_b,
                     const TensorView& b);

// Byte range [first, last) a contiguous tensor covers; {0, 0} when empty or absent.
struct ByteRange {
  uintptr_t first = 0, last = 0;
};
ByteRange byte_range(const TensorView& t);

// "[3, 1]" for the flat index 25 of a tensor of shape [T, 8]
std::string index_string(const TensorView& t, int64_t flat);

}  // namespace fp4moe::detail

namespace fp4moe::detail {
// Routing parameters for E experts and top-k (SPEC §4): k in [1, E]; sigmoid_grouped
// needs n_group | E, 1 <= topk_group <= n_group and k <= topk_group * (E / n_group);
// a finite routed_scaling_factor. `prefix` names the struct in messages ("desc.routing").
void expect_routing(std::string_view entry, std::string_view prefix, const RoutingDesc& routing, int64_t E,
                    int64_t k);
}  // namespace fp4moe::detail
