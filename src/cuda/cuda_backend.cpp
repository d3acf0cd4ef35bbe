// The "cuda" backend: route/permute/quantize/combine (pipeline.hpp) around the grouped
// GEMMs (gemm.hpp). Forward is a fixed sequence of launches on the caller's stream:
// no host synchronisation, no allocation (the caller's workspace holds everything),
// so it can be captured in a CUDA graph; results are bit-identical run to run.
//
// standard:  permute (1 kernel, or memset status + 3 kernels) | rows prep (0-1) | A prep (0-1) | gemm1 | gemm2 | combine
//            (FP4MOE_DECODE_LAYER=n: up to n tokens as one kernel on an H100 / H200, decode_layer.hpp)
//            (a one-kernel permute with an A prep kernel: A prep, then the permute as its dependent)
// batched:   memset status | clamp counts | rows prep (0-1) | A prep (0-1) | gemm1 | gemm2 | writeback
// (rows prep: the stream GEMM path's active-expert list, gemm_prepare_rows)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend.hpp"
#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/decode_layer.hpp"
#include "cuda/gemm.hpp"
#include "cuda/gemm_internal.hpp"
#include "cuda/pipeline.hpp"

namespace fp4moe::detail {
namespace {

using cuda::DeviceGuard;
using cuda::GemmPath;

// One cudaMalloc'd array, freed on its device.
class DeviceArray {
 public:
  DeviceArray(const void* host, size_t bytes, int device) : device_(device) {
    DeviceGuard g(device);
    FP4MOE_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)));
    if (bytes) FP4MOE_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
  }
  ~DeviceArray() {
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) return;
    (void)cudaSetDevice(device_);
    (void)cudaFree(ptr_);
    (void)cudaSetDevice(prev);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  template <class T>
  const T* as() const { return static_cast<const T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  int device_ = 0;
};

// ---------------------------------------------------------------------------
// Workspace layout. One function computes it for the size queries and for forward.
// Sections in this order, each starting on a 256-byte boundary (byte offsets):
//   status     uint32                      device error bits (pipeline.hpp kStatus*); at byte
//                                          kLayerBarrierOffset of its 256, the one-kernel
//                                          layer's grid barrier counter (decode_layer.hpp)
//   begin      int32 (E_local)             first row of each expert in the row space
//   count      int32 (E_local)             rows of each expert
//   scratch    int32 (permute_scratch)     per-chunk expert offsets  (standard only)
//   row_token  int32 (T*k)                 permuted position -> token (standard only)
//   slot_row   int32 (T*k)                 slot t*k+j -> permuted position or -1 (standard only)
//   a_bf16     bf16 (A_rows, H)            W4A16: GEMM-1 input when x is not usable as is;
//                                          W4A4 on a path that runs it on bf16 values
//                                          (a_values): x's NVFP4 values, e2m1 * e4m3
//   a_fp4      u8 (A_rows, H/2)            W4A4 otherwise: GEMM-1 input, two e2m1 per byte
//   a_scale    e4m3 (A_rows, H/16)         its linear block scales
//   h_bf16     bf16 (rows, Ir)             W4A16: act(gate, up); W4A4 with a_values: its
//                                          NVFP4 requantization's values, e2m1 * e4m3; h is
//                                          k-permuted, Ir = kperm_row(I) (cuda/gemm.hpp)
//   h_fp4      u8 (rows, Ir/2)             W4A4 otherwise: act(gate, up) requantized
//   h_scale    e4m3 (rows, I/16)           its linear block scales
//   y          f32 (rows, H)               GEMM-2 output, one row per routed slot
//   partials   (gemm_scratch_bytes)        the GEMM path's scratch: splitk, stream, sm90 and decode for W4A4
//                                          (bf16 staging of the NVFP4 activations) at prefill sizes
// standard: A_rows = T, rows = T*k; batched: A_rows = rows = E_local*M (row e*M + r).
// No work (T == 0 or M == 0) needs no workspace: size 0.
// ---------------------------------------------------------------------------
constexpr size_t kLayerBarrierOffset = 128;

struct Layout {
  size_t status = 0, begin = 0, count = 0, scratch = 0, row_token = 0, slot_row = 0;
  size_t a_bf16 = 0, a_fp4 = 0, a_scale = 0, h_bf16 = 0, h_fp4 = 0, h_scale = 0, y = 0;
  size_t partials = 0, partials_bytes = 0;
  size_t total = 0;
};

Layout layout(const LayerDesc& d, bool a_values, bool a_kperm, int64_t num_local, int64_t a_rows, int64_t rows,
              int64_t slots, size_t partials_bytes) {
  Layout l;
  if (rows <= 0) return l;
  const bool w4a4 = d.act_quant == ActQuant::nvfp4;
  const size_t H = size_t(d.hidden), I = size_t(d.intermediate);
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t here = at;
    at += (bytes + 255) / 256 * 256;
    return here;
  };
  l.status = take(sizeof(uint32_t));
  l.begin = take(size_t(num_local) * 4);
  l.count = take(size_t(num_local) * 4);
  l.scratch = take(size_t(cuda::permute_scratch_ints(slots, num_local)) * 4 * (slots > 0));
  l.row_token = take(size_t(slots) * 4);
  l.slot_row = take(size_t(slots) * 4);
  const bool fp4_data = w4a4 && !a_values;  // the activations as NVFP4 data and scales
  // (a_kperm: k-permuted rows of kperm_row(H) for the wgmma kernels, cuda/gemm.hpp gemm1_reads_kperm)
  l.a_bf16 = take(fp4_data ? 0 : size_t(a_rows) * size_t(a_kperm ? cuda::kperm_row(int64_t(H)) : int64_t(H)) * 2);
  l.a_fp4 = take(fp4_data ? size_t(a_rows) * H / 2 : 0);
  l.a_scale = take(fp4_data ? size_t(a_rows) * H / 16 : 0);
  const size_t Ir = size_t(cuda::kperm_row(int64_t(I)));  // h is k-permuted (cuda/gemm.hpp Gemm1Args)
  l.h_bf16 = take(fp4_data ? 0 : size_t(rows) * Ir * 2);
  l.h_fp4 = take(fp4_data ? size_t(rows) * Ir / 2 : 0);
  l.h_scale = take(fp4_data ? size_t(rows) * I / 16 : 0);
  l.y = take(size_t(rows) * H * 4);
  l.partials = take(partials_bytes);
  l.partials_bytes = partials_bytes;
  l.total = at;
  return l;
}

template <class T>
T* at(const TensorView& ws, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(ws.data) + offset);
}

class CudaBackend final : public Backend {
 public:
  // Keeps nothing of w but its scalars: the weights live on the device from here on (a host
  // copy per layer would be one more checkpoint's worth of host memory for the layer's life).
  CudaBackend(const HostWeights& w, int dev) : a13_dq_(w.a13_dq), a2_dq_(w.a2_dq) {
    desc = w.desc;
    num_local = w.num_local;
    name = "cuda";
    device = DeviceType::cuda;
    device_id = dev;
    path_ = cuda::gemm_path();
    dw_ = cuda::upload_weights(w, dev);
    a_values_ = desc.act_quant == ActQuant::nvfp4 && cuda::gemm_stages_activations(*dw_, path_);
    // expert_map (E) int32 global -> local or -1; identity when the checkpoint had none
    std::vector<int32_t> map = w.expert_map;
    if (map.empty()) {
      map.resize(size_t(desc.num_experts));
      for (size_t e = 0; e < map.size(); ++e) map[e] = int32_t(e);
    }
    map_ = std::make_unique<DeviceArray>(map.data(), map.size() * 4, dev);
  }

  size_t workspace_size(int64_t T) const override {
    const int64_t slots = T * desc.top_k;
    return layout(desc, a_values_, kperm_a(slots), num_local, T, slots, slots, partials_bytes(slots, false)).total;
  }
  size_t batched_workspace_size(int64_t M) const override {
    const int64_t rows = num_local * M;
    return layout(desc, a_values_, kperm_a(rows), num_local, rows, rows, 0, partials_bytes(rows, true)).total;
  }

  void forward(const ForwardArgs& args) const override {
    const TensorView& X = args.hidden_states;
    const int64_t T = X.shape[0], H = desc.hidden, k = args.topk_ids.shape[1];
    if (T == 0) return;
    if (args.apply_router_weight_on_input && k != 1)
      fail(ErrorKind::unsupported, "forward: apply_router_weight_on_input: got top_k " + std::to_string(k) +
                                       ", need top_k == 1 on the cuda backend");
    const bool kperm = kperm_a(T * k);
    const Layout l = layout(desc, a_values_, kperm, num_local, T, T * k, T * k, partials_bytes(T * k, false));
    const TensorView& ws = args.workspace;
    auto stream = static_cast<cudaStream_t>(args.stream);
    DeviceGuard guard(device_id);

    uint32_t* status = at<uint32_t>(ws, l.status);  // zeroed by permute (or the one-kernel layer)
    if (forward_one_kernel(args, l, status, stream)) return;

    cuda::ActRows src;
    src.x = X.data;
    src.dtype = X.dtype;
    src.rows = T;
    src.K = H;
    src.row_stride = X.stride[0];
    if (args.apply_router_weight_on_input) {
      src.row_weight = static_cast<const float*>(args.topk_weights.data);  // k == 1: row t's weight
      src.weight_stride = 1;
    }

    cuda::PermuteArgs p;
    p.topk_ids = static_cast<const int32_t*>(args.topk_ids.data);
    p.expert_map = map_->as<int32_t>();
    p.T = T;
    p.k = k;
    p.E = desc.num_experts;
    p.num_local = num_local;
    p.status = status;
    p.begin = at<int32_t>(ws, l.begin);
    p.count = at<int32_t>(ws, l.count);
    p.row_token = at<int32_t>(ws, l.row_token);
    p.slot_row = at<int32_t>(ws, l.slot_row);
    p.scratch = at<int32_t>(ws, l.scratch);

    // The activation preparation reads only x, the permute only the ids: where both are one
    // kernel, the preparation runs first and the permute as its programmatic dependent, so the
    // chain to GEMM 1 has no full launch gap (FP4MOE_PREP_FIRST=0: the permute first).
    cuda::Gemm1Args g1;
    const bool prep_first = prepare_launches(src, kperm) && cuda::permute_one_kernel(T * k, num_local) &&
                            cuda::decode_pdl(device_id) && !cuda::env_switch("FP4MOE_PREP_FIRST", '0');
    if (prep_first) prepare_a(src, l, ws, g1, kperm, stream);
    p.dependent = prep_first;
    const bool permuted_by_kernel = cuda::permute(p, stream);

    cuda::ExpertRows rows{p.begin, p.count, T * k, T * k};
    set_partials(l, ws, g1.partials, g1.partials_bytes);
    cuda::gemm_prepare_rows(*dw_, path_, rows, g1.partials, g1.partials_bytes, stream);
    g1.rows = rows;
    g1.a_gather = p.row_token;
    g1.a_rows = T;
    if (!prep_first) prepare_a(src, l, ws, g1, kperm, stream);
    set_h(l, ws, g1);
    g1.after_kernel = permuted_by_kernel;  // the permute's last kernel, or the A preparation's after it or before it
    if (T == 1) g1.one_token = {p.topk_ids, p.expert_map, p.E, int(k), p.slot_row};
    cuda::gemm1(*dw_, g1, path_, stream);

    cuda::Gemm2Args g2 = gemm2_args(rows, l, ws);
    g2.rows_settled = true;  // rows came from the permute / batched counts, before GEMM 1
    const bool combine_dependent = cuda::gemm2(*dw_, g2, path_, stream);

    cuda::CombineArgs c;
    c.y = g2.y;
    c.slot_row = p.slot_row;
    c.topk_weights = args.apply_router_weight_on_input ? nullptr : static_cast<const float*>(args.topk_weights.data);
    c.T = T;
    c.k = k;
    c.H = H;
    c.out = args.out.data;
    c.out_dtype = args.out.dtype;
    c.out_stride = args.out.stride[0];
    c.accumulate = args.accumulate;
    c.dependent = combine_dependent;
    cuda::combine(c, stream);
  }

  void forward_batched(const BatchedArgs& args) const override {
    const TensorView& X = args.hidden_states;
    const int64_t L = num_local, M = X.shape[1], H = desc.hidden;
    if (M == 0 || L == 0) return;
    const bool w4a4 = desc.act_quant == ActQuant::nvfp4;
    const bool x_fp4 = X.dtype == DType::u8;
    if (x_fp4 && !w4a4)
      fail_arg("forward_batched: hidden_states: got NVFP4 data (u8), need bf16|f16|f32 for a W4A16 layer");
    const bool kperm = kperm_a(L * M);
    const Layout l = layout(desc, a_values_, kperm, L, L * M, L * M, 0, partials_bytes(L * M, true));
    const TensorView& ws = args.workspace;
    auto stream = static_cast<cudaStream_t>(args.stream);
    DeviceGuard guard(device_id);

    uint32_t* status = at<uint32_t>(ws, l.status);
    FP4MOE_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(uint32_t), stream));
    int32_t* begin = at<int32_t>(ws, l.begin);
    int32_t* count = at<int32_t>(ws, l.count);
    cuda::batched_rows(static_cast<const int32_t*>(args.expert_num_tokens.data), L, M, status, begin, count, stream);

    cuda::ExpertRows rows{begin, count, L * M, L * M};
    cuda::Gemm1Args g1;
    set_partials(l, ws, g1.partials, g1.partials_bytes);
    cuda::gemm_prepare_rows(*dw_, path_, rows, g1.partials, g1.partials_bytes, stream);
    g1.rows = rows;
    g1.a_rows = L * M;  // identity gather: A row r is row r of the row space
    if (x_fp4) {
      // already NVFP4 with the layer's activation scale (what W4A4 dispatch sends)
      g1.a_fp4 = static_cast<const uint8_t*>(X.data);
      g1.a_scale = static_cast<const uint8_t*>(args.hidden_scale.data);
      g1.a_dq = a13_dq_;
    } else {
      cuda::ActRows src;
      src.x = X.data;
      src.dtype = X.dtype;
      src.rows = L * M;
      src.K = H;
      src.row_stride = H;  // contiguous [E_local, M, H] (validated by the API)
      src.group_count = count;
      src.M = M;
      prepare_a(src, l, ws, g1, kperm, stream);
    }
    set_h(l, ws, g1);
    g1.after_kernel = true;  // the batched counts' kernel (L > 0), or the A preparation's after it
    cuda::gemm1(*dw_, g1, path_, stream);
    cuda::Gemm2Args g2 = gemm2_args(rows, l, ws);
    g2.rows_settled = true;  // rows came from the permute / batched counts, before GEMM 1
    const bool writeback_dependent = cuda::gemm2(*dw_, g2, path_, stream);
    cuda::batched_writeback(g2.y, count, L, M, H, args.out.data, args.out.dtype, writeback_dependent, stream);
  }

  void check_device_errors(const TensorView& workspace, void* stream_ptr) const override {
    if (!workspace.present() || workspace.data == nullptr || workspace.nbytes() < sizeof(uint32_t)) return;
    auto stream = static_cast<cudaStream_t>(stream_ptr);
    DeviceGuard guard(device_id);
    uint32_t* status = static_cast<uint32_t*>(workspace.data);  // Layout::status is offset 0
    uint32_t bits = 0;
    FP4MOE_CUDA_CHECK(cudaMemcpyAsync(&bits, status, sizeof(bits), cudaMemcpyDeviceToHost, stream));
    FP4MOE_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (bits == 0) return;
    FP4MOE_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(uint32_t), stream));
    FP4MOE_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (bits & cuda::kStatusBadId)
      fail_arg("topk_ids: a value outside [-1, " + std::to_string(desc.num_experts) +
               ") was seen on the device (those slots were treated as -1)");
    if (bits & cuda::kStatusCountOverM)
      fail_arg("expert_num_tokens: a count above max_tokens M was seen on the device (clamped to M)");
    fail_arg("expert_num_tokens: a negative count was seen on the device (treated as 0)");
  }

 private:
  // The whole layer as one kernel at the fewest tokens (decode_layer.hpp), where it runs: true
  // when it was launched.
  bool forward_one_kernel(const ForwardArgs& args, const Layout& l, uint32_t* status, cudaStream_t stream) const {
    const int64_t T = args.hidden_states.shape[0], k = args.topk_ids.shape[1];
    if (T > cuda::decode_layer_tokens()) return false;
    cuda::DecodeLayerArgs a;
    a.x = args.hidden_states.data;
    a.x_dtype = args.hidden_states.dtype;
    a.x_stride = args.hidden_states.stride[0];
    a.T = T;
    a.topk_ids = static_cast<const int32_t*>(args.topk_ids.data);
    a.topk_weights = static_cast<const float*>(args.topk_weights.data);
    a.k = k;
    a.expert_map = map_->as<int32_t>();
    a.E = desc.num_experts;
    a.weight_on_input = args.apply_router_weight_on_input;
    a.w4a4 = desc.act_quant == ActQuant::nvfp4 && a_values_;
    a.a13_dq = a13_dq_;
    a.a2_dq = a2_dq_;
    a.status = status;
    a.barrier = reinterpret_cast<unsigned*>(reinterpret_cast<char*>(status) + kLayerBarrierOffset);
    a.h = at<uint16_t>(args.workspace, l.h_bf16);
    a.y = at<float>(args.workspace, l.y);
    a.out = args.out.data;
    a.out_dtype = args.out.dtype;
    a.out_stride = args.out.stride[0];
    a.accumulate = args.accumulate;
    return cuda::decode_layer(*dw_, a, stream);
  }

  // Whether x can be GEMM 1's bf16 input as it is: bf16, unweighted, rows contiguous.
  static bool x_as_is(const cuda::ActRows& src) {
    return src.dtype == DType::bf16 && !src.row_weight && src.row_stride == src.K;
  }
  // Whether GEMM 1 reads x k-permuted at these rows (the wgmma kernels: cuda/gemm.hpp
  // gemm1_reads_kperm): prepare_a then writes it so.
  bool kperm_a(int64_t rows_bound) const { return cuda::gemm1_reads_kperm(*dw_, path_, rows_bound); }
  // Whether prepare_a launches a kernel: every case but a W4A16 layer's x taken as it is.
  bool prepare_launches(const cuda::ActRows& src, bool kperm) const {
    return a_values_ || desc.act_quant == ActQuant::nvfp4 || !x_as_is(src) || kperm;
  }

  // GEMM-1 input: NVFP4 (W4A4) as its bf16 values where the path runs them (a_values_) or as
  // NVFP4 data, x itself (bf16, unweighted), or x converted to bf16; bf16 k-permuted where
  // GEMM 1 runs the wgmma kernels (kperm: Gemm1Args::a_kperm).
  void prepare_a(const cuda::ActRows& src, const Layout& l, const TensorView& ws, cuda::Gemm1Args& g1, bool kperm,
                 cudaStream_t stream) const {
    const cuda::KOrder order = kperm ? cuda::KOrder::kperm : cuda::KOrder::logical;
    if (a_values_) {
      uint16_t* a = at<uint16_t>(ws, l.a_bf16);
      cuda::act_to_nvfp4_values(src, 1.0f / a13_dq_, a, stream, order);
      g1.a_bf16 = a;
      g1.a_kperm = kperm;
      g1.a_dq = a13_dq_;
    } else if (desc.act_quant == ActQuant::nvfp4) {
      uint8_t* data = at<uint8_t>(ws, l.a_fp4);
      uint8_t* scale = at<uint8_t>(ws, l.a_scale);
      cuda::act_to_nvfp4(src, 1.0f / a13_dq_, data, scale, stream);
      g1.a_fp4 = data;
      g1.a_scale = scale;
      g1.a_dq = a13_dq_;
    } else if (x_as_is(src) && !kperm) {
      g1.a_bf16 = static_cast<const uint16_t*>(src.x);
    } else {
      uint16_t* a = at<uint16_t>(ws, l.a_bf16);
      cuda::act_to_bf16(src, a, stream, order);
      g1.a_bf16 = a;
      g1.a_kperm = kperm;
    }
  }

  void set_h(const Layout& l, const TensorView& ws, cuda::Gemm1Args& g1) const {
    if (a_values_) {
      g1.h_values = at<uint16_t>(ws, l.h_bf16);
      g1.h_gs = 1.0f / a2_dq_;
    } else if (desc.act_quant == ActQuant::nvfp4) {
      g1.h_fp4 = at<uint8_t>(ws, l.h_fp4);
      g1.h_scale = at<uint8_t>(ws, l.h_scale);
      g1.h_gs = 1.0f / a2_dq_;
    } else {
      g1.h_bf16 = at<uint16_t>(ws, l.h_bf16);
    }
  }

  cuda::Gemm2Args gemm2_args(const cuda::ExpertRows& rows, const Layout& l, const TensorView& ws) const {
    cuda::Gemm2Args g2;
    g2.rows = rows;
    if (a_values_) {
      g2.a_bf16 = at<uint16_t>(ws, l.h_bf16);
      g2.a_dq = a2_dq_;
    } else if (desc.act_quant == ActQuant::nvfp4) {
      g2.a_fp4 = at<uint8_t>(ws, l.h_fp4);
      g2.a_scale = at<uint8_t>(ws, l.h_scale);
      g2.a_dq = a2_dq_;
    } else {
      g2.a_bf16 = at<uint16_t>(ws, l.h_bf16);
    }
    g2.y = at<float>(ws, l.y);
    set_partials(l, ws, g2.partials, g2.partials_bytes);
    return g2;
  }

  // The GEMM path's scratch: one section serves gemm1 and then gemm2 (same stream). None for
  // the standard format with a_values_: the GEMMs then get bf16 A and write h as values, so
  // they stage nothing. The batched format keeps it: its input may arrive as NVFP4 data (EP
  // dispatch), which gemm1 stages there.
  size_t partials_bytes(int64_t rows, bool batched) const {
    return a_values_ && !batched ? 0 : cuda::gemm_scratch_bytes(*dw_, path_, rows, rows);
  }
  static void set_partials(const Layout& l, const TensorView& ws, float*& partials, size_t& bytes) {
    partials = l.partials_bytes ? at<float>(ws, l.partials) : nullptr;
    bytes = l.partials_bytes;
  }

  float a13_dq_ = 1.0f, a2_dq_ = 1.0f;  // W4A4: the activation dq_scales of GEMM 1 and GEMM 2
  GemmPath path_ = GemmPath::fast;
  // W4A4 on a path that runs NVFP4 activations as their bf16 values: x goes to GEMM 1 as those
  // values, quantized and converted in one kernel (act_to_nvfp4_values), and GEMM 1 writes h as
  // its values too (h_values), which GEMM 2 reads as bf16.
  bool a_values_ = false;
  std::unique_ptr<cuda::DeviceWeights> dw_;
  std::unique_ptr<DeviceArray> map_;
};

std::string cuda_why_not_here() {
  try {
    int dev = 0;
    if (std::string why = cuda::why_no_device(0); !why.empty()) return why;
    if (cudaGetDevice(&dev) != cudaSuccess) {
      (void)cudaGetLastError();
      dev = 0;
    }
    return cuda::why_no_kernel_image(dev);
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string cuda_why_not_for(const LayerDesc&) { return ""; }

std::unique_ptr<Backend> cuda_create(std::shared_ptr<const HostWeights> w, const PrepareOptions& options) {
  if (w->codes != CodeLayout::canonical) fail(ErrorKind::unsupported, "backend cuda: codes not canonical");
  int dev = options.device;
  if (dev < 0) FP4MOE_CUDA_CHECK(cudaGetDevice(&dev));
  if (std::string why = cuda::why_no_kernel_image(dev); !why.empty())
    fail(ErrorKind::unsupported, "backend cuda: device " + std::to_string(dev) + ": " + why);
  DeviceGuard guard(dev);
  return std::make_unique<CudaBackend>(*w, dev);  // w (the host copy) is released on return
}

}  // namespace

BackendEntry cuda_backend_entry() {
  return BackendEntry{"cuda", DeviceType::cuda, &cuda_why_not_here, &cuda_why_not_for,
                      "a CUDA device with a kernel image in this build", &cuda_create};
}

}  // namespace fp4moe::detail
