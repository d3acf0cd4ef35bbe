// The public format functions on tensors (fp4moe.hpp, SPEC §2): validate every argument,
// then run the host-array loops of quant.hpp on CPU tensors or the kernels of
// cuda/format_cuda.hpp on CUDA tensors. The leading tensor (x, data, scale or swizzled)
// decides where a call runs; every other tensor must be on the same device.
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/validate.hpp"
#include "backend.hpp"
#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "fp4moe/fp4moe.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include "cuda/common/device.hpp"
#include "cuda/format_cuda.hpp"
#include "cuda/pipeline.hpp"
#endif

namespace fp4moe {
namespace {

using detail::expect_disjoint;
using detail::expect_present;
using detail::expect_tensor;
using detail::fail_got;
using detail::fail_tensor;
using detail::Place;

const std::vector<DType> kActTypes = {DType::f32, DType::bf16, DType::f16};
const std::vector<DType> kScaleTypes = {DType::u8, DType::e4m3, DType::e8m0};

std::vector<int64_t> shape_of(const TensorView& t) { return {t.shape, t.shape + t.ndim}; }

// Leading dims of t (all but the last) followed by `last`.
std::vector<int64_t> with_last(const TensorView& t, int64_t last) {
  std::vector<int64_t> s = shape_of(t);
  s.back() = last;
  return s;
}

// Product of all dims but the last.
int64_t rows_of(const TensorView& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.ndim; ++i) r *= t.shape[i];
  return r;
}

// Where a call whose leading tensor is t runs: the CPU, or t's CUDA device (which needs
// a build with CUDA). On CUDA, data pointers need only be aligned to their element size:
// the kernels take 16-byte vector accesses only where a pointer allows them.
Place place_of(const char* fn, const char* arg, const TensorView& t) {
  if (t.device != DeviceType::cuda) return Place::cpu();
#if !defined(FP4MOE_WITH_CUDA)
  fail_tensor(fn, arg, t, "a CPU tensor (this build has no CUDA; copy it to the host)", ErrorKind::unsupported);
#endif
  Place at = Place::cuda(t.device_id);
  at.element_aligned = true;
  return at;
}

// The tensor whose shape defines the others': checked on its own (rank in
// [min_dims, max_dims], dtype, device `at`, contiguous, element count that fits the
// index arithmetic) and with `need` describing it in messages.
void expect_shaping(const char* fn, const char* arg, const TensorView& t, const std::vector<DType>& dtypes,
                    int min_dims, int max_dims, const std::string& need, const Place& at) {
  if (!t.present() || t.ndim < min_dims || t.ndim > max_dims) fail_tensor(fn, arg, t, need);
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] < 0 || __builtin_mul_overflow(n, t.shape[d], &n) || n > (int64_t(1) << 48))
      fail_tensor(fn, arg, t, need + " with at most 2^48 elements");
  expect_tensor(fn, arg, t, dtypes, shape_of(t), at);
}

// The input that defines both the shapes and the device of a call. Returns the device.
Place expect_leading(const char* fn, const char* arg, const TensorView& t, const std::vector<DType>& dtypes,
                     int min_dims, int max_dims, const std::string& need) {
  if (!t.present() || t.ndim < min_dims || t.ndim > max_dims) fail_tensor(fn, arg, t, need);
  const Place at = place_of(fn, arg, t);
  expect_shaping(fn, arg, t, dtypes, min_dims, max_dims, need, at);
  return at;
}

void expect_global_scale(const char* fn, const char* arg, float v) {
  if (std::isfinite(v) && v > 0.0f) return;
  char got[32];
  std::snprintf(got, sizeof got, "%g", double(v));
  fail_got(fn, arg, got, "a finite value > 0");
}

// A validated call: K (the reduction dim) and where it runs.
struct Checked {
  int64_t K;
  Place at;
};

// quantize's x [..., K], data u8 [..., K/2], scale [..., K/block], all on x's device.
Checked check_quantize(const char* fn, const TensorView& x, const TensorView& data, const TensorView& scale,
                       int block, DType scale_dtype) {
  const std::string need_x = "f32|bf16|f16[..., K] with K % " + std::to_string(block) + " == 0";
  const Place at = expect_leading(fn, "x", x, kActTypes, 1, TensorView::kMaxDims, need_x);
  const int64_t K = x.shape[x.ndim - 1];
  if (K % block != 0) fail_tensor(fn, "x", x, need_x);
  expect_tensor(fn, "data", data, DType::u8, with_last(x, K / 2), at);
  expect_tensor(fn, "scale", scale, scale_dtype, with_last(x, K / block), at);
  expect_disjoint(fn, "data", data, "x", x);
  expect_disjoint(fn, "scale", scale, "x", x);
  expect_disjoint(fn, "scale", scale, "data", data);
  return {K, at};
}

// dequantize's data u8 [..., K/2], scale [..., K/block], out [..., K], all on data's device.
Checked check_dequantize(const char* fn, const TensorView& data, const TensorView& scale, const TensorView& out,
                         int block, DType scale_dtype) {
  const std::string need_data = "u8[..., K/2] with K % " + std::to_string(block) + " == 0";
  const Place at = expect_leading(fn, "data", data, {DType::u8}, 1, TensorView::kMaxDims, need_data);
  const int64_t K = 2 * data.shape[data.ndim - 1];
  if (K % block != 0) fail_tensor(fn, "data", data, need_data);
  expect_tensor(fn, "scale", scale, scale_dtype, with_last(data, K / block), at);
  expect_tensor(fn, "out", out, kActTypes, with_last(data, K), at);
  expect_disjoint(fn, "out", out, "data", data);
  expect_disjoint(fn, "out", out, "scale", scale);
  return {K, at};
}

// Runs rows_fn(src f32 rows, first row, row count) over x: f32 tensors whole, bf16/f16
// one row at a time through an fp32 copy.
template <class RowsFn>
void for_f32_rows(const TensorView& x, int64_t K, RowsFn rows_fn) {
  const int64_t rows = rows_of(x);
  if (x.dtype == DType::f32) {
    rows_fn(static_cast<const float*>(x.data), int64_t(0), rows);
    return;
  }
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < K; ++i) row[size_t(i)] = detail::read_activation(x.data, x.dtype, r * K + i);
    rows_fn(row.data(), r, int64_t(1));
  }
}

// Runs rows_fn(first row, row count, f32 dst) and stores the result in out's dtype.
template <class RowsFn>
void to_out_rows(const TensorView& out, int64_t K, RowsFn rows_fn) {
  const int64_t rows = rows_of(out);
  if (out.dtype == DType::f32) {
    rows_fn(int64_t(0), rows, static_cast<float*>(out.data));
    return;
  }
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    rows_fn(r, int64_t(1), row.data());
    for (int64_t i = 0; i < K; ++i) detail::write_activation(out.data, out.dtype, r * K + i, row[size_t(i)]);
  }
}

// A linear scale [B..., R, C] and its swizzled form [B..., Rp * Cp]. The call runs
// where its input is (scale for swizzle, swizzled for unswizzle); scale gives the shapes
// either way. Returns the device.
Place check_swizzle(const char* fn, const TensorView& scale, const TensorView& swizzled, bool unswizzle) {
  const std::string need_scale = "u8|e4m3|e8m0[..., R, C]";
  Place at;
  if (unswizzle) {
    expect_present(fn, "swizzled", swizzled, "u8|e4m3|e8m0[..., Rp * Cp]");
    at = place_of(fn, "swizzled", swizzled);
    expect_shaping(fn, "scale", scale, kScaleTypes, 2, TensorView::kMaxDims, need_scale, at);
  } else {
    at = expect_leading(fn, "scale", scale, kScaleTypes, 2, TensorView::kMaxDims, need_scale);
  }
  const int64_t R = scale.shape[scale.ndim - 2], C = scale.shape[scale.ndim - 1];
  std::vector<int64_t> need(scale.shape, scale.shape + scale.ndim - 1);
  need.back() = swizzle_pad_rows(R) * swizzle_pad_cols(C);
  expect_tensor(fn, "swizzled", swizzled, kScaleTypes, need, at);
  expect_disjoint(fn, "swizzled", swizzled, "scale", scale);
  return at;
}

#if defined(FP4MOE_WITH_CUDA)
// Runs launch(stream) with `at`'s device current, so that the kernels run where the
// tensors are (the stream must belong to that device), once their data pointers are that
// device's memory (every other check of the call done). Launches only, no synchronisation;
// nothing is launched, nor a pointer looked at, for an empty problem.
template <class Launch>
void on_device(const char* fn, std::initializer_list<std::pair<std::string_view, const TensorView*>> tensors,
               const Place& at, int64_t elements, void* stream, Launch launch) {
  if (elements == 0) return;
  detail::expect_device_pointers(fn, tensors);
  cuda::DeviceGuard guard(at.device_id);
  launch(static_cast<cudaStream_t>(stream));
}
#endif

}  // namespace

void quantize_nvfp4(const TensorView& x, float q_scale, const TensorView& data, const TensorView& scale,
                    void* stream) {
  const char* fn = "quantize_nvfp4";
  const Checked c = check_quantize(fn, x, data, scale, kNvfp4Block, DType::e4m3);
  const int64_t K = c.K;
  expect_global_scale(fn, "q_scale", q_scale);
  auto* d = static_cast<uint8_t*>(data.data);
  auto* s = static_cast<uint8_t*>(scale.data);
  if (c.at.device == DeviceType::cuda) {
#if defined(FP4MOE_WITH_CUDA)
    on_device(fn, {{"x", &x}, {"data", &data}, {"scale", &scale}}, c.at, x.numel(), stream, [&](cudaStream_t st) {
      cuda::quantize_nvfp4_rows(x.data, x.dtype, rows_of(x), K, q_scale, d, s, st);
    });
#endif
    return;
  }
  for_f32_rows(x, K, [&](const float* src, int64_t r0, int64_t n) {
    detail::nvfp4_quantize_rows(src, n, K, q_scale, d + r0 * (K / 2), s + r0 * (K / kNvfp4Block));
  });
}

void dequantize_nvfp4(const TensorView& data, const TensorView& scale, float dq_scale, const TensorView& out,
                      void* stream) {
  const char* fn = "dequantize_nvfp4";
  const Checked c = check_dequantize(fn, data, scale, out, kNvfp4Block, DType::e4m3);
  const int64_t K = c.K;
  expect_global_scale(fn, "dq_scale", dq_scale);
  const auto* d = static_cast<const uint8_t*>(data.data);
  const auto* s = static_cast<const uint8_t*>(scale.data);
  if (c.at.device == DeviceType::cuda) {
#if defined(FP4MOE_WITH_CUDA)
    on_device(fn, {{"data", &data}, {"scale", &scale}, {"out", &out}}, c.at, out.numel(), stream, [&](cudaStream_t st) {
      cuda::nvfp4_dequantize_rows(d, s, rows_of(out), K, dq_scale, out.data, out.dtype, st);
    });
#endif
    return;
  }
  to_out_rows(out, K, [&](int64_t r0, int64_t n, float* dst) {
    detail::nvfp4_dequantize_rows(d + r0 * (K / 2), s + r0 * (K / kNvfp4Block), n, K, dq_scale, dst);
  });
}

void quantize_mxfp4(const TensorView& x, const TensorView& data, const TensorView& scale, void* stream) {
  const char* fn = "quantize_mxfp4";
  const Checked c = check_quantize(fn, x, data, scale, kMxfp4Block, DType::e8m0);
  const int64_t K = c.K;
  auto* d = static_cast<uint8_t*>(data.data);
  auto* s = static_cast<uint8_t*>(scale.data);
  if (c.at.device == DeviceType::cuda) {
#if defined(FP4MOE_WITH_CUDA)
    on_device(fn, {{"x", &x}, {"data", &data}, {"scale", &scale}}, c.at, x.numel(), stream, [&](cudaStream_t st) {
      cuda::mxfp4_quantize_rows(x.data, x.dtype, rows_of(x), K, d, s, st);
    });
#endif
    return;
  }
  for_f32_rows(x, K, [&](const float* src, int64_t r0, int64_t n) {
    detail::mxfp4_quantize_rows(src, n, K, d + r0 * (K / 2), s + r0 * (K / kMxfp4Block));
  });
}

void dequantize_mxfp4(const TensorView& data, const TensorView& scale, const TensorView& out, void* stream) {
  const char* fn = "dequantize_mxfp4";
  const Checked c = check_dequantize(fn, data, scale, out, kMxfp4Block, DType::e8m0);
  const int64_t K = c.K;
  const auto* d = static_cast<const uint8_t*>(data.data);
  const auto* s = static_cast<const uint8_t*>(scale.data);
  if (c.at.device == DeviceType::cuda) {
#if defined(FP4MOE_WITH_CUDA)
    on_device(fn, {{"data", &data}, {"scale", &scale}, {"out", &out}}, c.at, out.numel(), stream, [&](cudaStream_t st) {
      cuda::mxfp4_dequantize_rows(d, s, rows_of(out), K, out.data, out.dtype, st);
    });
#endif
    return;
  }
  to_out_rows(out, K, [&](int64_t r0, int64_t n, float* dst) {
    detail::mxfp4_dequantize_rows(d + r0 * (K / 2), s + r0 * (K / kMxfp4Block), n, K, dst);
  });
}

void swizzle_scales(const TensorView& scale, const TensorView& swizzled, void* stream) {
  const Place at = check_swizzle("swizzle_scales", scale, swizzled, false);
  const int64_t R = scale.shape[scale.ndim - 2], C = scale.shape[scale.ndim - 1];
  const int64_t mats = rows_of(swizzled), padded = swizzle_pad_rows(R) * swizzle_pad_cols(C);
  const auto* in = static_cast<const uint8_t*>(scale.data);
  auto* out = static_cast<uint8_t*>(swizzled.data);
  if (at.device == DeviceType::cuda) {
#if defined(FP4MOE_WITH_CUDA)
    on_device("swizzle_scales", {{"scale", &scale}, {"swizzled", &swizzled}}, at, swizzled.numel(), stream,
              [&](cudaStream_t st) { cuda::swizzle_scale_matrices(in, mats, R, C, out, st); });
#endif
    return;
  }
  for (int64_t m = 0; m < mats; ++m) detail::swizzle_scale_matrix(in + m * R * C, R, C, out + m * padded);
}

void unswizzle_scales(const TensorView& swizzled, const TensorView& scale, void* stream) {
  const Place at = check_swizzle("unswizzle_scales", scale, swizzled, true);
  const int64_t R = scale.shape[scale.ndim - 2], C = scale.shape[scale.ndim - 1];
  const int64_t mats = rows_of(swizzled), padded = swizzle_pad_rows(R) * swizzle_pad_cols(C);
  const auto* in = static_cast<const uint8_t*>(swizzled.data);
  auto* out = static_cast<uint8_t*>(scale.data);
  if (at.device == DeviceType::cuda) {
#if defined(FP4MOE_WITH_CUDA)
    on_device("unswizzle_scales", {{"swizzled", &swizzled}, {"scale", &scale}}, at, scale.numel(), stream,
              [&](cudaStream_t st) { cuda::unswizzle_scale_matrices(in, mats, R, C, out, st); });
#endif
    return;
  }
  for (int64_t m = 0; m < mats; ++m) detail::unswizzle_scale_matrix(in + m * padded, R, C, out + m * R * C);
}

}  // namespace fp4moe
