// fp4moe._C — the thin nanobind layer over include/fp4moe/fp4moe.hpp.
//
// Tensors arrive as anything that speaks DLPack (PyTorch, NumPy, CuPy, JAX) and are
// viewed in place as fp4moe::TensorView: no copy, no framework linked. Everything
// framework-specific (allocating outputs, finding the current stream, viewing
// float8 tensors as uint8) lives in python/fp4moe/__init__.py; this file only maps
// views, owns the layer's workspace and turns fp4moe::Error into Python exceptions.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <initializer_list>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "fp4moe/checkpoint.hpp"
#include "fp4moe/ep.hpp"
#include "fp4moe/fp4moe.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using fp4moe::DeviceType;
using fp4moe::DType;
using fp4moe::ErrorKind;
using fp4moe::TensorView;

[[noreturn]] void bad_arg(const std::string& message) {
  throw fp4moe::Error(ErrorKind::invalid_argument, message);
}

// ---------------------------------------------------------------------------
// DLPack -> TensorView
// ---------------------------------------------------------------------------
std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const char* base = "dtype";
  switch (C(t.code)) {
    case C::Int: base = "int"; break;
    case C::UInt: base = "uint"; break;
    case C::Float: base = "float"; break;
    case C::Bfloat: base = "bfloat"; break;
    case C::Complex: base = "complex"; break;
    case C::Bool: return "bool";
    case C::Float8_E4M3FN: return "float8_e4m3fn";
    case C::Float8_E5M2: return "float8_e5m2";
    case C::Float8_E8M0FNU: return "float8_e8m0fnu";
    case C::Float4_E2M1FN: return "float4_e2m1fn";
    default: return "dlpack dtype code " + std::to_string(int(t.code));
  }
  std::string s = base + std::to_string(int(t.bits));
  if (t.lanes != 1) s += "x" + std::to_string(int(t.lanes));
  return s;
}

// The fp4moe dtype a DLPack dtype maps to, or false when it has none.
bool map_dtype(nb::dlpack::dtype t, DType* out) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return false;
  const auto code = C(t.code);
  if (code == C::UInt && t.bits == 8) *out = DType::u8;
  else if (code == C::Float8_E4M3FN && t.bits == 8) *out = DType::e4m3;
  else if (code == C::Float8_E8M0FNU && t.bits == 8) *out = DType::e8m0;
  else if (code == C::Int && t.bits == 32) *out = DType::i32;
  else if (code == C::Float && t.bits == 32) *out = DType::f32;
  else if (code == C::Float && t.bits == 16) *out = DType::f16;
  else if (code == C::Bfloat && t.bits == 16) *out = DType::bf16;
  else return false;
  return true;
}

// What an argument may hold: FP8 scales come as float8 or as uint8 holding the same
// bytes; `bytes_as` names the FP8 type a uint8 tensor stands for.
struct ArgSpec {
  const char* name;
  DType bytes_as = DType::u8;
};

template <typename Array>
TensorView view_from(const Array& a, const ArgSpec& spec) {
  TensorView v;
  if (a.ndim() > size_t(TensorView::kMaxDims))
    bad_arg(std::string(spec.name) + ": got " + std::to_string(a.ndim()) +
            " dimensions, need at most " + std::to_string(TensorView::kMaxDims));
  DType dt;
  if (!map_dtype(a.dtype(), &dt))
    bad_arg(std::string(spec.name) + ": got dtype " + dlpack_dtype_name(a.dtype()) +
            ", need one of uint8, float8_e4m3fn, float8_e8m0fnu, int32, float32, float16, bfloat16");
  if (dt == DType::u8) dt = spec.bytes_as;
  v.dtype = dt;
  switch (a.device_type()) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:  // pinned host memory: the CPU reads it directly
      v.device = DeviceType::cpu;
      v.device_id = 0;
      break;
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      v.device = DeviceType::cuda;
      v.device_id = a.device_id();
      break;
    default:
      bad_arg(std::string(spec.name) + ": got a tensor on DLPack device type " +
              std::to_string(a.device_type()) + ", need cpu or cuda");
  }
  v.ndim = int(a.ndim());
  for (int i = 0; i < v.ndim; ++i) {
    v.shape[i] = int64_t(a.shape(size_t(i)));
    v.stride[i] = a.stride(size_t(i));
  }
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return v;
}

// Keeps every imported array alive for the duration of one call (the views borrow
// their memory).
struct Keep {
  std::vector<nb::ndarray<nb::ro>> in;
  std::vector<nb::ndarray<>> out;
};

TensorView input(nb::handle h, const ArgSpec& spec, Keep& keep) {
  if (h.is_none()) return TensorView{};
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(h, a, false))
    bad_arg(std::string(spec.name) + ": got a " + std::string(nb::type_name(h.type()).c_str()) +
            ", need a tensor that supports DLPack (torch, numpy, cupy, jax) or None");
  keep.in.push_back(a);
  return view_from(keep.in.back(), spec);
}

TensorView output(nb::handle h, const ArgSpec& spec, Keep& keep) {
  if (h.is_none()) return TensorView{};
  nb::ndarray<> a;
  if (!nb::try_cast(h, a, false))
    bad_arg(std::string(spec.name) + ": got a " + std::string(nb::type_name(h.type()).c_str()) +
            ", need a writable tensor that supports DLPack");
  keep.out.push_back(a);
  return view_from(keep.out.back(), spec);
}

void* as_stream(uintptr_t s) { return reinterpret_cast<void*>(s); }

// ---------------------------------------------------------------------------
// The layer's workspace: raw bytes on the layer's device, owned here so that a
// forward call neither allocates nor synchronises.
// ---------------------------------------------------------------------------
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  // Grows to at least `bytes` (contents are not kept).
  void reserve(size_t bytes, DeviceType device, int device_id) {
    if (bytes <= bytes_ && device == device_ && device_id == device_id_) return;
    release();
    device_ = device;
    device_id_ = device_id;
    if (bytes == 0) return;
    if (device == DeviceType::cpu) {
      // 256-byte alignment: what cudaMalloc gives, so backends see the same on both
      ptr_ = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (!ptr_) throw std::bad_alloc();
    } else {
#if defined(FP4MOE_WITH_CUDA)
      int previous = 0;
      cudaGetDevice(&previous);
      cudaSetDevice(device_id);
      const cudaError_t err = cudaMalloc(&ptr_, bytes);
      cudaSetDevice(previous);
      if (err != cudaSuccess) {
        ptr_ = nullptr;
        throw fp4moe::Error(ErrorKind::device, "workspace: cudaMalloc of " + std::to_string(bytes) +
                                                   " bytes on cuda:" + std::to_string(device_id) +
                                                   " failed: " + cudaGetErrorString(err));
      }
#else
      throw fp4moe::Error(ErrorKind::unsupported, "workspace: a CUDA layer needs a build with CUDA");
#endif
    }
    bytes_ = bytes;
  }

  TensorView view() const {
    if (bytes_ == 0) return TensorView{};
    return TensorView::of(ptr_, DType::u8, {int64_t(bytes_)}, device_, device_id_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (!ptr_) return;
    if (device_ == DeviceType::cpu) {
      std::free(ptr_);
    } else {
#if defined(FP4MOE_WITH_CUDA)
      int previous = 0;
      cudaGetDevice(&previous);
      cudaSetDevice(device_id_);
      cudaFree(ptr_);
      cudaSetDevice(previous);
#endif
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  DeviceType device_ = DeviceType::cpu;
  int device_id_ = 0;
};

// A prepared layer with its workspaces. Calls on one layer are serialised (they share
// the workspace); on CUDA that orders the launches, so callers keep one layer on one
// stream at a time.
struct PyLayer {
  explicit PyLayer(fp4moe::Layer&& l) : layer(std::move(l)) {}
  fp4moe::Layer layer;
  Buffer workspace;          // standard format, sized for max_num_tokens
  Buffer batched_workspace;  // batched format, sized for the largest M reserved
  int64_t max_num_tokens = 0;
  int64_t max_batched_tokens = 0;  // 0: grow on demand
  std::mutex mutex;

  void reserve_batched(int64_t m) {
    batched_workspace.reserve(layer.batched_workspace_size(m), layer.device(), layer.device_id());
  }
};

// s -> the option whose name (fp4moe::to_string) it is; else ValueError naming `arg` and
// listing the names.
template <class Kind>
Kind parse_kind(const std::string& s, const char* arg, std::initializer_list<Kind> options) {
  std::string need;
  for (Kind v : options) {
    if (s == fp4moe::to_string(v)) return v;
    need += std::string(need.empty() ? "'" : " or '") + fp4moe::to_string(v) + "'";
  }
  bad_arg(std::string(arg) + ": got '" + s + "', need " + need);
}

void set_kinds(fp4moe::LayerDesc& d, const std::string& weight_format, const std::string& act_quant,
               const std::string& activation, const std::string& gate_up) {
  using fp4moe::ActQuant, fp4moe::Activation, fp4moe::GateUpLayout, fp4moe::WeightFormat;
  d.weight_format = parse_kind(weight_format, "weight_format", {WeightFormat::nvfp4, WeightFormat::mxfp4});
  d.act_quant = parse_kind(act_quant, "act_quant", {ActQuant::none, ActQuant::nvfp4});
  d.activation = parse_kind(activation, "activation", {Activation::silu, Activation::swiglu_oai});
  d.gate_up = parse_kind(gate_up, "gate_up", {GateUpLayout::concat, GateUpLayout::interleaved});
}

// The SPEC §3 tensors, in CheckpointWeights order (w13, w13_scale, w13_scale_2, w2,
// w2_scale, w2_scale_2, w13_input_scale, w2_input_scale, w13_bias, w2_bias, expert_map),
// imported by DLPack and kept alive by `keep`. Block scales are e8m0 for MXFP4, else e4m3.
struct CheckpointHandles {
  nb::handle w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, w13_input_scale, w2_input_scale, w13_bias,
      w2_bias, expert_map;
};
fp4moe::CheckpointWeights import_checkpoint(const CheckpointHandles& h, fp4moe::WeightFormat format, Keep& k) {
  const DType sdt = format == fp4moe::WeightFormat::mxfp4 ? DType::e8m0 : DType::e4m3;
  fp4moe::CheckpointWeights w;
  w.w13 = input(h.w13, {"w13"}, k);
  w.w13_scale = input(h.w13_scale, {"w13_scale", sdt}, k);
  w.w13_scale_2 = input(h.w13_scale_2, {"w13_scale_2"}, k);
  w.w2 = input(h.w2, {"w2"}, k);
  w.w2_scale = input(h.w2_scale, {"w2_scale", sdt}, k);
  w.w2_scale_2 = input(h.w2_scale_2, {"w2_scale_2"}, k);
  w.w13_input_scale = input(h.w13_input_scale, {"w13_input_scale"}, k);
  w.w2_input_scale = input(h.w2_input_scale, {"w2_input_scale"}, k);
  w.w13_bias = input(h.w13_bias, {"w13_bias"}, k);
  w.w2_bias = input(h.w2_bias, {"w2_bias"}, k);
  w.expert_map = input(h.expert_map, {"expert_map"}, k);
  return w;
}
fp4moe::RoutingMethod parse_method(const std::string& s) {
  if (s == "softmax") return fp4moe::RoutingMethod::softmax;
  if (s == "sigmoid_grouped") return fp4moe::RoutingMethod::sigmoid_grouped;
  bad_arg("method: got '" + s + "', need 'softmax' or 'sigmoid_grouped'");
}

const char* device_name(DeviceType d) { return d == DeviceType::cpu ? "cpu" : "cuda"; }

nb::dict backend_dict(const fp4moe::BackendInfo& b) {
  nb::dict d;
  d["name"] = b.name;
  d["device"] = device_name(b.device);
  d["available"] = b.available;
  d["reason"] = b.reason;
  return d;
}

// An EP layer (fp4moe::ep) with the communicator it owns (when built from a unique id)
// and its workspace. Members are destroyed in reverse order: workspace, layer, then the
// communicator the layer uses.
struct PyEpLayer {
  std::unique_ptr<fp4moe::ep::Communicator> comm;  // null when the caller passed its own ncclComm_t
  std::unique_ptr<fp4moe::ep::EpLayer> layer;
  Buffer workspace;
  std::mutex mutex;
};

fp4moe::ep::Mode parse_ep_mode(const std::string& s) {
  if (s == "all_to_all") return fp4moe::ep::Mode::all_to_all;
  if (s == "all_reduce") return fp4moe::ep::Mode::all_reduce;
  bad_arg("mode: got '" + s + "', need 'all_to_all' or 'all_reduce'");
}
fp4moe::ep::WireDType parse_wire(const std::string& s, const char* what) {
  if (s == "bf16") return fp4moe::ep::WireDType::bf16;
  if (s == "nvfp4") return fp4moe::ep::WireDType::nvfp4;
  if (s == "f32") return fp4moe::ep::WireDType::f32;
  bad_arg(std::string(what) + ": got '" + s + "', need 'bf16', 'nvfp4' or 'f32'");
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "fp4moe C++ core (use the fp4moe package, not this module directly)";

  // ErrorKind::invalid_argument is the caller's mistake (ValueError); unsupported and
  // device failures are RuntimeError. The C++ message is kept as is.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const fp4moe::Error& e) {
      PyErr_SetString(e.kind() == ErrorKind::invalid_argument ? PyExc_ValueError : PyExc_RuntimeError,
                      e.what());
    }
  });

#if defined(FP4MOE_WITH_CUDA)
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
  m.attr("__version__") = fp4moe::version();

  // --- formats -------------------------------------------------------------
  // On the device of the input; CUDA work on `stream` (a cudaStream_t as an int, 0: default).
  m.def("quantize_nvfp4",
        [](nb::handle x, float q_scale, nb::handle data, nb::handle scale, uintptr_t stream) {
          Keep k;
          const TensorView vx = input(x, {"x"}, k), vd = output(data, {"data"}, k),
                           vs = output(scale, {"scale", DType::e4m3}, k);
          nb::gil_scoped_release nogil;
          fp4moe::quantize_nvfp4(vx, q_scale, vd, vs, as_stream(stream));
        },
        "x"_a, "q_scale"_a, "data"_a, "scale"_a, "stream"_a);
  m.def("dequantize_nvfp4",
        [](nb::handle data, nb::handle scale, float dq_scale, nb::handle out, uintptr_t stream) {
          Keep k;
          const TensorView vd = input(data, {"data"}, k), vs = input(scale, {"scale", DType::e4m3}, k),
                           vo = output(out, {"out"}, k);
          nb::gil_scoped_release nogil;
          fp4moe::dequantize_nvfp4(vd, vs, dq_scale, vo, as_stream(stream));
        },
        "data"_a, "scale"_a, "dq_scale"_a, "out"_a, "stream"_a);
  m.def("quantize_mxfp4",
        [](nb::handle x, nb::handle data, nb::handle scale, uintptr_t stream) {
          Keep k;
          const TensorView vx = input(x, {"x"}, k), vd = output(data, {"data"}, k),
                           vs = output(scale, {"scale", DType::e8m0}, k);
          nb::gil_scoped_release nogil;
          fp4moe::quantize_mxfp4(vx, vd, vs, as_stream(stream));
        },
        "x"_a, "data"_a, "scale"_a, "stream"_a);
  m.def("dequantize_mxfp4",
        [](nb::handle data, nb::handle scale, nb::handle out, uintptr_t stream) {
          Keep k;
          const TensorView vd = input(data, {"data"}, k), vs = input(scale, {"scale", DType::e8m0}, k),
                           vo = output(out, {"out"}, k);
          nb::gil_scoped_release nogil;
          fp4moe::dequantize_mxfp4(vd, vs, vo, as_stream(stream));
        },
        "data"_a, "scale"_a, "out"_a, "stream"_a);
  m.def("swizzle_scales",
        [](nb::handle scale, nb::handle swizzled, uintptr_t stream) {
          Keep k;
          const TensorView vs = input(scale, {"scale"}, k), vz = output(swizzled, {"swizzled"}, k);
          nb::gil_scoped_release nogil;
          fp4moe::swizzle_scales(vs, vz, as_stream(stream));
        },
        "scale"_a, "swizzled"_a, "stream"_a);
  m.def("unswizzle_scales",
        [](nb::handle swizzled, nb::handle scale, uintptr_t stream) {
          Keep k;
          const TensorView vz = input(swizzled, {"swizzled"}, k), vs = output(scale, {"scale"}, k);
          nb::gil_scoped_release nogil;
          fp4moe::unswizzle_scales(vz, vs, as_stream(stream));
        },
        "swizzled"_a, "scale"_a, "stream"_a);

  // --- routing -------------------------------------------------------------
  m.def("route",
        [](nb::handle router_logits, nb::handle correction_bias, nb::handle topk_weights,
           nb::handle topk_ids, int64_t top_k, const std::string& method, bool renormalize,
           int n_group, int topk_group, float routed_scaling_factor, uintptr_t stream) {
          Keep k;
          fp4moe::RouteArgs a;
          a.router_logits = input(router_logits, {"router_logits"}, k);
          a.correction_bias = input(correction_bias, {"correction_bias"}, k);
          a.topk_weights = output(topk_weights, {"topk_weights"}, k);
          a.topk_ids = output(topk_ids, {"topk_ids"}, k);
          a.top_k = top_k;
          a.routing.method = parse_method(method);
          a.routing.renormalize = renormalize;
          a.routing.n_group = n_group;
          a.routing.topk_group = topk_group;
          a.routing.routed_scaling_factor = routed_scaling_factor;
          a.stream = as_stream(stream);
          nb::gil_scoped_release nogil;
          fp4moe::route(a);
        },
        "router_logits"_a, "correction_bias"_a.none(), "topk_weights"_a, "topk_ids"_a, "top_k"_a,
        "method"_a, "renormalize"_a, "n_group"_a, "topk_group"_a, "routed_scaling_factor"_a,
        "stream"_a);

  // --- build facts ---------------------------------------------------------
  m.def("backends", [] {
    nb::list out;
    for (const auto& b : fp4moe::backends()) out.append(backend_dict(b));
    return out;
  });
  m.def("build_info", [] {
    const fp4moe::BuildInfo b = fp4moe::build_info();
    nb::dict d;
    d["version"] = b.version;
    d["cuda_archs"] = b.cuda_archs;
    d["cuda_device_count"] = b.cuda_device_count;
    d["cuda_devices"] = b.cuda_devices;
    d["cpu_simd"] = b.cpu_simd;
    return d;
  });

  m.def("select_backend",
        [](int64_t hidden, int64_t intermediate, int64_t num_experts, int64_t top_k,
           const std::string& weight_format, const std::string& act_quant, const std::string& activation,
           const std::string& gate_up, const std::string& requested) {
          fp4moe::LayerDesc desc;
          desc.hidden = hidden;
          desc.intermediate = intermediate;
          desc.num_experts = num_experts;
          desc.top_k = top_k;
          set_kinds(desc, weight_format, act_quant, activation, gate_up);
          const fp4moe::Selection s = fp4moe::select_backend(desc, requested);
          return std::make_tuple(s.backend, s.reason);
        },
        "hidden"_a, "intermediate"_a, "num_experts"_a, "top_k"_a, "weight_format"_a, "act_quant"_a,
        "activation"_a, "gate_up"_a, "requested"_a);

  // --- real checkpoints -----------------------------------------------------
  // One MoE layer gathered into SPEC §3's layout (load_moe_layer). Tensors come back as
  // (bytes, dtype name, shape) copies; fp4moe.load_layer turns them into NumPy arrays.
  m.def(
      "load_layer",
      [](const std::string& path, int layer) {
        fp4moe::LoadedLayer L = [&] {
          nb::gil_scoped_release nogil;
          return fp4moe::load_moe_layer(fp4moe::Checkpoint::open(path), layer);
        }();
        nb::dict tensors;
        auto put = [&](const char* name, const TensorView& v) {
          if (!v.present()) return;
          std::vector<int64_t> shape(v.shape, v.shape + v.ndim);
          tensors[name] = nb::make_tuple(nb::bytes(static_cast<const char*>(v.data), v.nbytes()),
                                         std::string(fp4moe::dtype_name(v.dtype)), shape);
        };
        const fp4moe::CheckpointWeights& w = L.weights;
        put("w13", w.w13), put("w13_scale", w.w13_scale), put("w13_scale_2", w.w13_scale_2);
        put("w2", w.w2), put("w2_scale", w.w2_scale), put("w2_scale_2", w.w2_scale_2);
        put("w13_input_scale", w.w13_input_scale), put("w2_input_scale", w.w2_input_scale);
        put("w13_bias", w.w13_bias), put("w2_bias", w.w2_bias);
        put("router_weight", L.router_weight), put("router_bias", L.router_bias);
        put("correction_bias", L.correction_bias);
        const fp4moe::LayerDesc& d = L.desc;
        nb::dict routing;
        routing["method"] = std::string(fp4moe::to_string(d.routing.method));
        routing["renormalize"] = d.routing.renormalize;
        routing["n_group"] = d.routing.n_group;
        routing["topk_group"] = d.routing.topk_group;
        routing["routed_scaling_factor"] = d.routing.routed_scaling_factor;
        nb::dict r;
        r["model_type"] = L.model_type;
        r["hidden"] = d.hidden;
        r["intermediate"] = d.intermediate;
        r["num_experts"] = d.num_experts;
        r["top_k"] = d.top_k;
        r["weight_format"] = std::string(fp4moe::to_string(d.weight_format));
        r["activation"] = std::string(fp4moe::to_string(d.activation));
        r["gate_up"] = std::string(fp4moe::to_string(d.gate_up));
        r["swiglu_limit"] = d.swiglu_limit;
        r["routing"] = routing;
        r["tensors"] = tensors;
        return r;
      },
      "path"_a, "layer"_a);

  // --- the layer -----------------------------------------------------------
  nb::class_<PyLayer>(m, "Layer")
      .def(
          "__init__",
          [](PyLayer* self, nb::handle w13, nb::handle w13_scale, nb::handle w13_scale_2, nb::handle w2,
             nb::handle w2_scale, nb::handle w2_scale_2, nb::handle w13_input_scale,
             nb::handle w2_input_scale, nb::handle w13_bias, nb::handle w2_bias, nb::handle expert_map,
             int64_t hidden, int64_t intermediate, int64_t num_experts, int64_t top_k,
             const std::string& weight_format, const std::string& act_quant,
             const std::string& activation, const std::string& gate_up, const std::string& backend,
             int device, int64_t max_num_tokens, int64_t max_batched_tokens) {
            fp4moe::LayerDesc desc;
            desc.hidden = hidden;
            desc.intermediate = intermediate;
            desc.num_experts = num_experts;
            desc.top_k = top_k;
            set_kinds(desc, weight_format, act_quant, activation, gate_up);
            if (max_num_tokens < 0)
              bad_arg("max_num_tokens: got " + std::to_string(max_num_tokens) + ", need >= 0");
            if (max_batched_tokens < 0)
              bad_arg("max_batched_tokens: got " + std::to_string(max_batched_tokens) + ", need >= 0");
            Keep k;
            const fp4moe::CheckpointWeights w =
                import_checkpoint({w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, w13_input_scale,
                                   w2_input_scale, w13_bias, w2_bias, expert_map},
                                  desc.weight_format, k);
            fp4moe::PrepareOptions options;
            options.backend = backend;
            options.device = device;
            auto* layer = new (self) PyLayer([&] {
              nb::gil_scoped_release nogil;
              return fp4moe::Layer::prepare(desc, w, options);
            }());
            try {
              layer->max_num_tokens = max_num_tokens;
              layer->max_batched_tokens = max_batched_tokens;
              layer->workspace.reserve(layer->layer.workspace_size(max_num_tokens), layer->layer.device(),
                                       layer->layer.device_id());
              if (max_batched_tokens > 0) layer->reserve_batched(max_batched_tokens);
            } catch (...) {
              layer->~PyLayer();
              throw;
            }
          },
          "w13"_a, "w13_scale"_a, "w13_scale_2"_a.none(), "w2"_a, "w2_scale"_a, "w2_scale_2"_a.none(),
          "w13_input_scale"_a.none(), "w2_input_scale"_a.none(), "w13_bias"_a.none(),
          "w2_bias"_a.none(), "expert_map"_a.none(), "hidden"_a, "intermediate"_a, "num_experts"_a,
          "top_k"_a, "weight_format"_a, "act_quant"_a, "activation"_a, "gate_up"_a, "backend"_a,
          "device"_a, "max_num_tokens"_a, "max_batched_tokens"_a)
      .def(
          "forward",
          [](PyLayer& L, nb::handle hidden_states, nb::handle topk_weights, nb::handle topk_ids,
             nb::handle out, bool apply_router_weight_on_input, bool accumulate, uintptr_t stream) {
            Keep k;
            fp4moe::ForwardArgs a;
            a.hidden_states = input(hidden_states, {"hidden_states"}, k);
            a.topk_weights = input(topk_weights, {"topk_weights"}, k);
            a.topk_ids = input(topk_ids, {"topk_ids"}, k);
            a.out = output(out, {"out"}, k);
            a.apply_router_weight_on_input = apply_router_weight_on_input;
            a.accumulate = accumulate;
            a.stream = as_stream(stream);
            nb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(L.mutex);
            // The workspace was sized at construction; a larger call would need an
            // allocation inside the call, which this module promises never to do.
            const int64_t tokens = a.hidden_states.ndim >= 1 ? a.hidden_states.shape[0] : 0;
            if (tokens > L.max_num_tokens)
              bad_arg("hidden_states: got " + std::to_string(tokens) + " tokens, need at most max_num_tokens = " +
                      std::to_string(L.max_num_tokens) + " (given when the layer was built)");
            if (L.layer.workspace_size(tokens) > L.workspace.bytes())
              bad_arg("hidden_states: got " + std::to_string(tokens) + " tokens, more than the workspace holds");
            a.workspace = L.workspace.view();
            L.layer.forward(a);
          },
          "hidden_states"_a, "topk_weights"_a, "topk_ids"_a, "out"_a, "apply_router_weight_on_input"_a,
          "accumulate"_a, "stream"_a)
      .def(
          "forward_batched",
          [](PyLayer& L, nb::handle hidden_states, nb::handle hidden_scale, nb::handle expert_num_tokens,
             nb::handle out, uintptr_t stream) {
            Keep k;
            fp4moe::BatchedArgs a;
            a.hidden_states = input(hidden_states, {"hidden_states"}, k);
            a.hidden_scale = input(hidden_scale, {"hidden_scale", DType::e4m3}, k);
            a.expert_num_tokens = input(expert_num_tokens, {"expert_num_tokens"}, k);
            a.out = output(out, {"out"}, k);
            a.stream = as_stream(stream);
            nb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(L.mutex);
            const int64_t m = a.hidden_states.ndim >= 2 ? a.hidden_states.shape[1] : 0;
            if (L.max_batched_tokens > 0 && m > L.max_batched_tokens)
              bad_arg("hidden_states: got " + std::to_string(m) + " rows per expert, need at most " +
                      "max_batched_tokens = " + std::to_string(L.max_batched_tokens));
            if (m >= 0 && L.layer.batched_workspace_size(m) > L.batched_workspace.bytes()) L.reserve_batched(m);
            a.workspace = L.batched_workspace.view();
            L.layer.forward_batched(a);
          },
          "hidden_states"_a, "hidden_scale"_a.none(), "expert_num_tokens"_a, "out"_a, "stream"_a)
      .def(
          "check_device_errors",
          [](PyLayer& L, uintptr_t stream) {
            nb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(L.mutex);
            if (L.workspace.bytes()) L.layer.check_device_errors(L.workspace.view(), as_stream(stream));
            if (L.batched_workspace.bytes())
              L.layer.check_device_errors(L.batched_workspace.view(), as_stream(stream));
          },
          "stream"_a)
      .def("workspace_size", [](const PyLayer& L, int64_t n) { return L.layer.workspace_size(n); }, "num_tokens"_a)
      .def("batched_workspace_size", [](const PyLayer& L, int64_t m) { return L.layer.batched_workspace_size(m); },
           "max_tokens"_a)
      .def_prop_ro("backend", [](const PyLayer& L) { return L.layer.backend(); })
      .def_prop_ro("selection_reason", [](const PyLayer& L) { return L.layer.selection_reason(); })
      .def_prop_ro("device", [](const PyLayer& L) {
        return L.layer.device() == DeviceType::cpu ? std::string("cpu")
                                                   : "cuda:" + std::to_string(L.layer.device_id());
      })
      .def_prop_ro("num_local_experts", [](const PyLayer& L) { return L.layer.num_local_experts(); })
      .def_prop_ro("top_k", [](const PyLayer& L) { return L.layer.desc().top_k; })
      .def_prop_ro("max_num_tokens", [](const PyLayer& L) { return L.max_num_tokens; })
      .def_prop_ro("workspace_bytes",
                   [](const PyLayer& L) { return L.workspace.bytes() + L.batched_workspace.bytes(); });
  // --- expert parallelism (fp4moe::ep) --------------------------------------
  m.def("ep_why_unavailable", [] { return fp4moe::ep::why_unavailable(); });
  m.def("ep_nccl_version", [] { return fp4moe::ep::nccl_version(); });
  m.def("ep_unique_id", [] {
    const fp4moe::ep::UniqueId id = fp4moe::ep::unique_id();
    return nb::bytes(id.bytes.data(), id.bytes.size());
  });
  m.def(
      "ep_placement",
      [](int64_t num_experts, int world, int rank) {
        return std::make_tuple(fp4moe::ep::first_expert(num_experts, world, rank),
                               fp4moe::ep::num_local_experts(num_experts, world, rank));
      },
      "num_experts"_a, "world"_a, "rank"_a);

  nb::class_<PyEpLayer>(m, "EpLayer")
      .def(
          "__init__",
          [](PyEpLayer* self, nb::bytes unique_id, uintptr_t comm, int world, int rank, int device,
             nb::handle w13, nb::handle w13_scale, nb::handle w13_scale_2, nb::handle w2, nb::handle w2_scale,
             nb::handle w2_scale_2, nb::handle w13_input_scale, nb::handle w2_input_scale, nb::handle w13_bias,
             nb::handle w2_bias, int64_t hidden, int64_t intermediate, int64_t num_experts, int64_t top_k,
             const std::string& weight_format, const std::string& act_quant, const std::string& activation,
             const std::string& gate_up, const std::string& backend, const std::string& mode,
             const std::string& dispatch, const std::string& combine, int64_t max_tokens, int64_t send_rows,
             int64_t expert_rows) {
            fp4moe::ep::EpDesc d;
            d.layer.hidden = hidden;
            d.layer.intermediate = intermediate;
            d.layer.num_experts = num_experts;
            d.layer.top_k = top_k;
            set_kinds(d.layer, weight_format, act_quant, activation, gate_up);
            d.mode = parse_ep_mode(mode);
            d.dispatch = parse_wire(dispatch, "dispatch");
            d.combine = parse_wire(combine, "combine");
            d.capacity.max_tokens = max_tokens;
            d.capacity.send_rows = send_rows;
            d.capacity.expert_rows = expert_rows;
            Keep k;
            const fp4moe::CheckpointWeights w =
                import_checkpoint({w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, w13_input_scale,
                                   w2_input_scale, w13_bias, w2_bias, nb::none()},
                                  d.layer.weight_format, k);
            fp4moe::PrepareOptions options;
            options.backend = backend;
            auto* L = new (self) PyEpLayer();
            try {
              nb::gil_scoped_release nogil;  // both calls below are collective: other ranks may be slow
              ncclComm_t c = reinterpret_cast<ncclComm_t>(comm);
              if (!c) {
                const std::string raw(unique_id.c_str(), unique_id.size());
                fp4moe::ep::UniqueId id;
                if (raw.size() != id.bytes.size())
                  bad_arg("unique_id: got " + std::to_string(raw.size()) + " bytes, need " +
                          std::to_string(id.bytes.size()) + " (from fp4moe.ep.unique_id())");
                std::copy(raw.begin(), raw.end(), id.bytes.begin());
                L->comm = std::make_unique<fp4moe::ep::Communicator>(
                    fp4moe::ep::Communicator::init_rank(id, world, rank, device));
                c = L->comm->get();
              }
              L->layer = std::make_unique<fp4moe::ep::EpLayer>(fp4moe::ep::EpLayer::prepare(d, w, c, options));
              L->workspace.reserve(L->layer->workspace_size(), DeviceType::cuda, L->layer->device_id());
            } catch (...) {
              L->~PyEpLayer();
              throw;
            }
          },
          "unique_id"_a, "comm"_a, "world"_a, "rank"_a, "device"_a, "w13"_a, "w13_scale"_a,
          "w13_scale_2"_a.none(), "w2"_a, "w2_scale"_a, "w2_scale_2"_a.none(), "w13_input_scale"_a.none(),
          "w2_input_scale"_a.none(), "w13_bias"_a.none(), "w2_bias"_a.none(), "hidden"_a, "intermediate"_a,
          "num_experts"_a, "top_k"_a, "weight_format"_a, "act_quant"_a, "activation"_a, "gate_up"_a, "backend"_a,
          "mode"_a, "dispatch"_a, "combine"_a, "max_tokens"_a, "send_rows"_a, "expert_rows"_a)
      .def(
          "forward",
          [](PyEpLayer& L, nb::handle hidden_states, nb::handle topk_weights, nb::handle topk_ids, nb::handle out,
             bool accumulate, uintptr_t stream) {
            Keep k;
            fp4moe::ep::EpForwardArgs a;
            a.hidden_states = input(hidden_states, {"hidden_states"}, k);
            a.topk_weights = input(topk_weights, {"topk_weights"}, k);
            a.topk_ids = input(topk_ids, {"topk_ids"}, k);
            a.out = output(out, {"out"}, k);
            a.accumulate = accumulate;
            a.stream = as_stream(stream);
            nb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(L.mutex);
            a.workspace = L.workspace.view();
            L.layer->forward(a);
          },
          "hidden_states"_a, "topk_weights"_a, "topk_ids"_a, "out"_a, "accumulate"_a, "stream"_a)
      .def(
          "check_device_errors",
          [](PyEpLayer& L, uintptr_t stream) {
            nb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(L.mutex);
            L.layer->check_device_errors(L.workspace.view(), as_stream(stream));
          },
          "stream"_a)
      .def_prop_ro("rank", [](const PyEpLayer& L) { return L.layer->rank(); })
      .def_prop_ro("world", [](const PyEpLayer& L) { return L.layer->world(); })
      .def_prop_ro("device", [](const PyEpLayer& L) { return L.layer->device_id(); })
      .def_prop_ro("num_local_experts", [](const PyEpLayer& L) { return L.layer->num_local_experts(); })
      .def_prop_ro("workspace_bytes", [](const PyEpLayer& L) { return L.workspace.bytes(); })
      .def_prop_ro("capacity", [](const PyEpLayer& L) {
        const fp4moe::ep::Capacity& c = L.layer->desc().capacity;
        return std::make_tuple(c.max_tokens, c.send_rows, c.expert_rows);
      })
      .def_prop_ro("traffic", [](const PyEpLayer& L) {
        const fp4moe::ep::Traffic t = L.layer->traffic();
        return std::make_tuple(t.dispatch_bytes, t.combine_bytes, t.remote_bytes);
      });
}
