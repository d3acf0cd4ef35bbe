// Tensors, enum names, errors and the version: the vocabulary every other file uses.
#include <limits>
#include <sstream>

#include "backend.hpp"

namespace fp4moe {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::u8: return "u8";
    case DType::e4m3: return "e4m3";
    case DType::e8m0: return "e8m0";
    case DType::i32: return "i32";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "dtype?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::u8:
    case DType::e4m3:
    case DType::e8m0: return 1;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i32:
    case DType::f32: return 4;
  }
  return 0;
}

const char* to_string(WeightFormat v) {
  switch (v) {
    case WeightFormat::nvfp4: return "nvfp4";
    case WeightFormat::mxfp4: return "mxfp4";
  }
  return "weight_format?";
}
const char* to_string(ActQuant v) {
  switch (v) {
    case ActQuant::none: return "none";
    case ActQuant::nvfp4: return "nvfp4";
  }
  return "act_quant?";
}
const char* to_string(Activation v) {
  switch (v) {
    case Activation::silu: return "silu";
    case Activation::swiglu_oai: return "swiglu_oai";
  }
  return "activation?";
}
const char* to_string(GateUpLayout v) {
  switch (v) {
    case GateUpLayout::concat: return "concat";
    case GateUpLayout::interleaved: return "interleaved";
  }
  return "gate_up?";
}
const char* to_string(RoutingMethod v) {
  switch (v) {
    case RoutingMethod::softmax: return "softmax";
    case RoutingMethod::sigmoid_grouped: return "sigmoid_grouped";
  }
  return "routing?";
}

// A view whose ndim is outside [-1, kMaxDims] is malformed: it has no elements, is
// not contiguous, and every check rejects it by its dims before reading its shape.
static bool well_formed(const TensorView& t) { return t.ndim >= -1 && t.ndim <= TensorView::kMaxDims; }

// A negative extent makes a view malformed too (no elements; every check rejects it by its
// shape), and a product past int64 saturates, so that describing any view, the rejected ones
// included, overflows nothing (UBSan found 2 * INT64_MIN here, v65).
int64_t TensorView::numel() const {
  if (ndim < 0 || !well_formed(*this)) return 0;
  for (int d = 0; d < ndim; ++d)
    if (shape[d] <= 0) return 0;
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d)
    if (__builtin_mul_overflow(n, shape[d], &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

size_t TensorView::nbytes() const {
  size_t b = 0;
  if (__builtin_mul_overflow(size_t(numel()), dtype_size(dtype), &b)) return std::numeric_limits<size_t>::max();
  return b;
}

// Row-major; dims of extent 1 may carry any stride (as in PyTorch), and an empty
// tensor is contiguous whatever its strides.
bool TensorView::is_contiguous() const {
  if (!well_formed(*this)) return false;
  if (ndim < 0 || numel() == 0) return true;
  int64_t want = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != want) return false;
    // A stride past int64 cannot be matched: such a view is no contiguous one.
    if (d > 0 && __builtin_mul_overflow(want, shape[d], &want)) return false;
  }
  return true;
}

std::string TensorView::describe() const {
  if (!present()) return "nothing";
  if (!well_formed(*this)) return "a tensor with ndim " + std::to_string(ndim);
  std::ostringstream s;
  s << dtype_name(dtype) << '[';
  for (int d = 0; d < ndim; ++d) s << (d ? ", " : "") << shape[d];
  s << "] on " << (device == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(device_id));
  if (!is_contiguous()) {
    s << " with strides [";
    for (int d = 0; d < ndim; ++d) s << (d ? ", " : "") << stride[d];
    s << ']';
  }
  return s.str();
}

TensorView TensorView::of(const void* data, DType dtype, const std::vector<int64_t>& shape,
                          DeviceType device, int device_id) {
  if (shape.size() > size_t(kMaxDims))
    detail::fail_arg("TensorView::of: shape: got " + std::to_string(shape.size()) + " dims, need at most " +
                     std::to_string(kMaxDims));
  TensorView t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.ndim = int(shape.size());
  t.device = device;
  t.device_id = device_id;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (shape[d] < 0)
      detail::fail_arg("TensorView::of: shape[" + std::to_string(d) + "]: got " + std::to_string(shape[d]) +
                       ", need >= 0");
    t.shape[d] = shape[d];
    t.stride[d] = stride;
    stride *= shape[d];
  }
  return t;
}

TensorView TensorView::of(const void* data, DType dtype, std::initializer_list<int64_t> shape,
                          DeviceType device, int device_id) {
  return of(data, dtype, std::vector<int64_t>(shape), device, device_id);
}

const char* version() { return FP4MOE_VERSION; }

namespace detail {
void fail(ErrorKind kind, const std::string& message) { throw Error(kind, message); }
}  // namespace detail

}  // namespace fp4moe
