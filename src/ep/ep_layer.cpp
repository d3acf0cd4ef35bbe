// fp4moe::ep (ep.hpp): the EP layer around one rank's fp4moe::Layer.
//
// all_to_all forward, on the caller's stream, no host synchronisation:
//   memset status | permute over the E global experts (cuda::permute, identity map)
//   | pack: x rows -> one slab of C bf16 rows per destination rank (ep_kernels.cu)
//   | [nvfp4] quantize the slabs with the layer's input scale (cuda::quantize_nvfp4_rows)
//   | NCCL group: counts (W, n_max) and slabs to / from every rank
//   | land_map + scatter: slabs -> batched [n_local, M, H] | Layer::forward_batched -> y f32
//   | gather_back: y rows -> one slab per source rank | NCCL group: slabs back
//   | combine: out[t] = sum_j w_j * y_j in j order (bit-identical to cuda::combine)
// all_reduce forward:
//   Layer::forward (expert_map) -> partial f32 [T, H] | ncclAllReduce(sum) | round to out
#if defined(FP4MOE_WITH_EP)

#include "fp4moe/ep.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api/validate.hpp"
#include "backend.hpp"
#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/pipeline.hpp"
#include "ep/ep_kernels.hpp"
#include "ep/nccl_loader.hpp"
#include "ep/placement.hpp"

namespace fp4moe::ep {

using cuda::DeviceGuard;
using detail::fail;
using detail::fail_arg;

// ---------------------------------------------------------------------------
// Placement and NCCL facts
// ---------------------------------------------------------------------------
std::string why_unavailable() {
  std::string why;
  return nccl_api(&why) ? "" : why;
}

std::string nccl_version() {
  const NcclApi* a = nccl_api();
  int v = 0;
  if (!a || a->GetVersion(&v) != ncclSuccess) return "";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

UniqueId unique_id() {
  static_assert(sizeof(ncclUniqueId) == sizeof(UniqueId::bytes), "UniqueId holds one ncclUniqueId");
  ncclUniqueId id;
  FP4MOE_NCCL_CHECK(nccl().GetUniqueId(&id));
  UniqueId u;
  std::memcpy(u.bytes.data(), &id, sizeof(id));
  return u;
}

// ---------------------------------------------------------------------------
// Communicator
// ---------------------------------------------------------------------------
Communicator Communicator::init_rank(const UniqueId& id, int world, int rank, int device) {
  const NcclApi& n = nccl();
  if (world < 1) fail_arg("Communicator::init_rank: world: got " + std::to_string(world) + ", need >= 1");
  if (rank < 0 || rank >= world)
    fail_arg("Communicator::init_rank: rank: got " + std::to_string(rank) + ", need [0, " + std::to_string(world) + ")");
  int count = 0;
  FP4MOE_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    fail_arg("Communicator::init_rank: device: got " + std::to_string(device) + ", need [0, " +
             std::to_string(count) + ") (visible CUDA devices)");
  FP4MOE_CUDA_CHECK(cudaSetDevice(device));  // NCCL binds the communicator to the current device
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes.data(), sizeof(nid));
  ncclComm_t comm = nullptr;
  FP4MOE_NCCL_CHECK(n.CommInitRank(&comm, world, nid, rank));
  return Communicator(comm, rank, world, device);
}

std::vector<Communicator> Communicator::init_all(const std::vector<int>& devices) {
  const NcclApi& n = nccl();
  int count = 0;
  FP4MOE_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (devices.empty()) fail_arg("Communicator::init_all: devices: got none, need >= 1");
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] < 0 || devices[i] >= count)
      fail_arg("Communicator::init_all: devices[" + std::to_string(i) + "]: got " + std::to_string(devices[i]) +
               ", need [0, " + std::to_string(count) + ") (visible CUDA devices)");
  std::vector<ncclComm_t> comms(devices.size());
  FP4MOE_NCCL_CHECK(n.CommInitAll(comms.data(), int(devices.size()), devices.data()));
  std::vector<Communicator> v;
  for (size_t i = 0; i < devices.size(); ++i) v.push_back(Communicator(comms[i], int(i), int(devices.size()), devices[i]));
  return v;
}

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(o.comm_), rank_(o.rank_), world_(o.world_), device_(o.device_) {
  o.comm_ = nullptr;
}
Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    if (comm_) (void)nccl().CommDestroy(comm_);
    comm_ = o.comm_;
    rank_ = o.rank_;
    world_ = o.world_;
    device_ = o.device_;
    o.comm_ = nullptr;
  }
  return *this;
}
Communicator::~Communicator() {
  if (comm_) (void)nccl_api()->CommDestroy(comm_);
}

// ---------------------------------------------------------------------------
// Workspace layout, computed in one place for workspace_size and forward. Sections in this
// order, each on a 256-byte boundary (byte offsets). W ranks, C = send_rows,
// M = expert_rows, n = n_local, Tk = max_tokens * k.
//   all_to_all:
//     status      u32 (kEpStatusWords)        bits, rows a slab needed, rows an expert needed
//     begin,count i32 (E) each                permute over the global experts
//     scratch     i32 (permute_scratch_ints(Tk, E))
//     row_token   i32 (Tk)                    permuted position -> token
//     slot_row    i32 (Tk)                    slot -> permuted position or -1
//     send_counts i32 (W, n_max)              rows per destination expert, per destination
//     recv_counts i32 (W, n_max)              rows per local expert, per source
//     send_bf16   bf16 (W, C, H)              the slabs (bf16 dispatch), or the quantizer's input
//     send_fp4    u8 (W, C, H/2), send_scale e4m3 (W, C, H/16)       nvfp4 dispatch
//     recv_x      bf16 (W, C, H) | u8 (W, C, H/2); recv_scale (W, C, H/16)
//     row_dest    i32 (W, C)                  slab row -> batched row or -1
//     slab_prefix i32 (W, n_max + 1)          first slab row of each local expert, per source
//     src_offset  i32 (W, n_max)              rows of expert e from sources before s
//     ent         i32 (n)                     expert_num_tokens of the batched call
//     bin_x       bf16 (n, M, H) | u8 (n, M, H/2); bin_scale e4m3 (n, M, H/16)
//     y           f32 (n, M, H)               batched output, unweighted
//     back_send   f32|bf16 (W, C, H)          y rows, slab per source rank
//     back_recv   f32|bf16 (W, C, H)          this rank's rows, slab per owner rank
//     inner       u8 (Layer::batched_workspace_size(M))
//   all_reduce:
//     status | partial f32 (max_tokens, H) | inner u8 (Layer::workspace_size(max_tokens))
// ---------------------------------------------------------------------------
namespace {

struct Layout {
  size_t status = 0, begin = 0, count = 0, scratch = 0, row_token = 0, slot_row = 0;
  size_t send_counts = 0, recv_counts = 0, send_bf16 = 0, send_fp4 = 0, send_scale = 0;
  size_t recv_x = 0, recv_scale = 0, row_dest = 0, slab_prefix = 0, src_offset = 0, ent = 0, bin_x = 0, bin_scale = 0, y = 0;
  size_t back_send = 0, back_recv = 0, partial = 0, inner = 0, inner_bytes = 0, total = 0;
};

}  // namespace

struct EpLayer::Impl {
  EpDesc desc;
  ncclComm_t comm = nullptr;
  int rank = 0, world = 1, device = 0;
  Placement pl;
  int64_t n_local = 0, n_max = 0;
  float a13_gs = 1.0f;  // W4A4: q_scale of the dispatch quantizer = 1 / the layer's a13_dq
  Layer layer;
  int32_t* identity_map = nullptr;  // (E) device, g -> g: the sender's permute over all experts
  Layout lay;

  Impl(Layer&& l) : layer(std::move(l)) {}
  ~Impl() {
    if (identity_map) {
      int prev = 0;
      if (cudaGetDevice(&prev) == cudaSuccess) {
        (void)cudaSetDevice(device);
        (void)cudaFree(identity_map);
        (void)cudaSetDevice(prev);
      }
    }
  }

  Layout layout() const {
    Layout l;
    const LayerDesc& d = desc.layer;
    const size_t H = size_t(d.hidden), E = size_t(d.num_experts), k = size_t(d.top_k);
    const size_t W = size_t(world), n = size_t(n_local), nm = size_t(n_max);
    const size_t T = size_t(desc.capacity.max_tokens), C = size_t(desc.capacity.send_rows);
    const size_t M = size_t(desc.capacity.expert_rows);
    size_t at = 0;
    auto take = [&at](size_t bytes) {
      const size_t here = at;
      at += (bytes + 255) / 256 * 256;
      return here;
    };
    l.status = take(kEpStatusWords * 4);
    if (desc.mode == Mode::all_reduce) {
      l.partial = take(T * H * 4);
      l.inner_bytes = layer.workspace_size(int64_t(T));
      l.inner = take(l.inner_bytes);
      l.total = at;
      return l;
    }
    const bool fp4 = desc.dispatch == WireDType::nvfp4;
    const size_t back = desc.combine == WireDType::f32 ? 4 : 2;
    l.begin = take(E * 4);
    l.count = take(E * 4);
    l.scratch = take(size_t(cuda::permute_scratch_ints(int64_t(T * k), int64_t(E))) * 4);
    l.row_token = take(T * k * 4);
    l.slot_row = take(T * k * 4);
    l.send_counts = take(W * nm * 4);
    l.recv_counts = take(W * nm * 4);
    l.send_bf16 = take(W * C * H * 2);
    l.send_fp4 = take(fp4 ? W * C * H / 2 : 0);
    l.send_scale = take(fp4 ? W * C * H / 16 : 0);
    l.recv_x = take(fp4 ? W * C * H / 2 : W * C * H * 2);
    l.recv_scale = take(fp4 ? W * C * H / 16 : 0);
    l.row_dest = take(W * C * 4);
    l.slab_prefix = take(W * (nm + 1) * 4);
    l.src_offset = take(W * nm * 4);
    l.ent = take(n * 4);
    l.bin_x = take(fp4 ? n * M * H / 2 : n * M * H * 2);
    l.bin_scale = take(fp4 ? n * M * H / 16 : 0);
    l.y = take(n * M * H * 4);
    l.back_send = take(W * C * H * back);
    l.back_recv = take(W * C * H * back);
    l.inner_bytes = layer.batched_workspace_size(int64_t(M));
    l.inner = take(l.inner_bytes);
    l.total = at;
    return l;
  }

  void forward_a2a(const EpForwardArgs& a, char* ws, cudaStream_t stream) const;
  void forward_allreduce(const EpForwardArgs& a, char* ws, cudaStream_t stream) const;
};

namespace {

template <class T>
T* at(char* ws, size_t offset) {
  return reinterpret_cast<T*>(ws + offset);
}

// Host values reduced over the world (min and max), for the setup-time agreement checks.
void allreduce_i64(ncclComm_t comm, int device, std::vector<int64_t>& mins, std::vector<int64_t>& maxs) {
  const NcclApi& n = nccl();
  DeviceGuard g(device);
  const size_t bytes = mins.size() * 8;
  int64_t* buf = nullptr;
  cudaStream_t s = nullptr;
  FP4MOE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t err = cudaMalloc(&buf, 2 * bytes);
  if (err != cudaSuccess) {
    (void)cudaStreamDestroy(s);
    FP4MOE_CUDA_CHECK(err);
  }
  auto cleanup = [&] {
    (void)cudaFree(buf);
    (void)cudaStreamDestroy(s);
  };
  try {
    FP4MOE_CUDA_CHECK(cudaMemcpy(buf, mins.data(), bytes, cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(cudaMemcpy(buf + mins.size(), maxs.data(), bytes, cudaMemcpyHostToDevice));
    FP4MOE_NCCL_CHECK(n.GroupStart());
    FP4MOE_NCCL_CHECK(n.AllReduce(buf, buf, mins.size(), ncclInt64, ncclMin, comm, s));
    FP4MOE_NCCL_CHECK(n.AllReduce(buf + mins.size(), buf + mins.size(), maxs.size(), ncclInt64, ncclMax, comm, s));
    FP4MOE_NCCL_CHECK(n.GroupEnd());
    FP4MOE_CUDA_CHECK(cudaStreamSynchronize(s));
    FP4MOE_CUDA_CHECK(cudaMemcpy(mins.data(), buf, bytes, cudaMemcpyDeviceToHost));
    FP4MOE_CUDA_CHECK(cudaMemcpy(maxs.data(), buf + mins.size(), bytes, cudaMemcpyDeviceToHost));
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
}

// Every rank must describe the same layer and the same fixed sizes: the slabs are matched
// by size, so a disagreement would corrupt data instead of failing.
// local_error: this rank's own rejection of its arguments ("" when none), folded into the
// same reduction so that every rank throws together instead of leaving the others waiting
// in a collective.
void check_agreement(const char* entry, const EpDesc& d, ncclComm_t comm, int device,
                     const std::string& local_error = "") {
  const LayerDesc& L = d.layer;
  const std::vector<std::pair<const char*, int64_t>> fields = {
      {"layer.hidden", L.hidden},
      {"layer.intermediate", L.intermediate},
      {"layer.num_experts", L.num_experts},
      {"layer.top_k", L.top_k},
      {"layer.weight_format", int64_t(L.weight_format)},
      {"layer.act_quant", int64_t(L.act_quant)},
      {"mode", int64_t(d.mode)},
      {"dispatch", int64_t(d.dispatch)},
      {"combine", int64_t(d.combine)},
      {"capacity.max_tokens", d.capacity.max_tokens},
      {"capacity.send_rows", d.capacity.send_rows},
      {"capacity.expert_rows", d.capacity.expert_rows},
      {"(arguments accepted)", local_error.empty() ? 1 : 0},
  };
  std::vector<int64_t> mins, maxs;
  for (const auto& f : fields) {
    mins.push_back(f.second);
    maxs.push_back(f.second);
  }
  allreduce_i64(comm, device, mins, maxs);
  if (!local_error.empty()) fail_arg(local_error);
  if (mins.back() == 0)
    fail_arg(std::string(entry) + ": another rank rejected its arguments (its error names them); every rank stops");
  for (size_t i = 0; i + 1 < fields.size(); ++i)
    if (mins[i] != maxs[i])
      fail_arg(std::string(entry) + ": desc." + fields[i].first + ": got " + std::to_string(fields[i].second) +
               " on this rank, values from " + std::to_string(mins[i]) + " to " + std::to_string(maxs[i]) +
               " across ranks, need the same on every rank");
}

// max over the world of one float (W4A4 activation scales), via its bits: positive floats
// order like their bit patterns.
float allreduce_max_positive(float v, ncclComm_t comm, int device) {
  int32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  std::vector<int64_t> mins{bits}, maxs{bits};
  allreduce_i64(comm, device, mins, maxs);
  const int32_t m = int32_t(maxs[0]);
  float out = 0;
  std::memcpy(&out, &m, 4);
  return out;
}

std::vector<float> fetch_f32(const TensorView& t) {
  std::vector<float> v(size_t(t.numel()));
  if (v.empty()) return v;
  if (t.device == DeviceType::cuda) {
    DeviceGuard g(t.device_id);
    FP4MOE_CUDA_CHECK(cudaMemcpy(v.data(), t.data, v.size() * 4, cudaMemcpyDeviceToHost));
  } else {
    std::memcpy(v.data(), t.data, v.size() * 4);
  }
  return v;
}

void resolve_capacity(Capacity& c, const LayerDesc& L, int world, int64_t n_max, const char* entry) {
  if (c.max_tokens < 1)
    fail_arg(std::string(entry) + ": capacity.max_tokens: got " + std::to_string(c.max_tokens) + ", need >= 1");
  if (c.send_rows < 0 || c.expert_rows < 0)
    fail_arg(std::string(entry) + ": capacity.send_rows / expert_rows: got " + std::to_string(c.send_rows) + " / " +
             std::to_string(c.expert_rows) + ", need >= 0 (0: the size that never overflows)");
  // a token sends at most min(k, n_max) rows to one rank: its k experts are distinct
  if (c.send_rows == 0) c.send_rows = c.max_tokens * std::min<int64_t>(L.top_k, n_max);
  if (c.expert_rows == 0) c.expert_rows = int64_t(world) * c.max_tokens;
  // the slab counts are int32 on the device, and one slab row index must fit too
  const int64_t limit = int64_t(1) << 30;
  if (c.send_rows * world >= limit || c.expert_rows * n_max >= limit || c.max_tokens * L.top_k >= limit)
    fail_arg(std::string(entry) + ": capacity: got max_tokens " + std::to_string(c.max_tokens) + ", send_rows " +
             std::to_string(c.send_rows) + ", expert_rows " + std::to_string(c.expert_rows) +
             ", need world*send_rows, n_local*expert_rows and max_tokens*k below 2^30");
}

}  // namespace

// ---------------------------------------------------------------------------
// EpLayer
// ---------------------------------------------------------------------------
EpLayer::EpLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EpLayer::EpLayer(EpLayer&&) noexcept = default;
EpLayer& EpLayer::operator=(EpLayer&&) noexcept = default;
EpLayer::~EpLayer() = default;

const EpDesc& EpLayer::desc() const { return impl_->desc; }
int EpLayer::rank() const { return impl_->rank; }
int EpLayer::world() const { return impl_->world; }
int EpLayer::device_id() const { return impl_->device; }
int64_t EpLayer::num_local_experts() const { return impl_->n_local; }
const Layer& EpLayer::local_layer() const { return impl_->layer; }
size_t EpLayer::workspace_size() const { return impl_->lay.total; }

EpLayer EpLayer::prepare(const EpDesc& desc_in, const CheckpointWeights& local, ncclComm_t comm,
                         const PrepareOptions& options) {
  const char* kEntry = "EpLayer::prepare";
  const NcclApi& n = nccl();
  if (!comm) fail_arg("EpLayer::prepare: comm: got null, need an ncclComm_t (ep::Communicator or the caller's)");
  int world = 0, rank = 0, device = 0;
  FP4MOE_NCCL_CHECK(n.CommCount(comm, &world));
  FP4MOE_NCCL_CHECK(n.CommUserRank(comm, &rank));
  FP4MOE_NCCL_CHECK(n.CommCuDevice(comm, &device));
  EpDesc d = desc_in;
  const LayerDesc& L = d.layer;
  const Placement pl{L.num_experts, world};
  int64_t n_local = 0;
  // Every check of this rank's arguments runs before the first collective, which then
  // stops every rank if any rank's arguments were rejected (instead of leaving the others
  // waiting in it).
  std::vector<float> a13, a2;
  std::string local_error;
  try {
    check_world(kEntry, L.num_experts, world, rank);
    if (L.top_k < 1 || L.hidden < 16 || L.hidden % 16 != 0)
      fail_arg(std::string(kEntry) + ": desc.layer: got hidden " + std::to_string(L.hidden) + ", top_k " +
               std::to_string(L.top_k) + ", need hidden a positive multiple of 16 and top_k >= 1");
    if (d.mode == Mode::all_to_all) {
      if (d.dispatch != WireDType::bf16 && d.dispatch != WireDType::nvfp4)
        fail_arg(std::string(kEntry) + ": desc.dispatch: got " + to_string(d.dispatch) + ", need bf16|nvfp4");
      if (d.dispatch == WireDType::nvfp4 && L.act_quant != ActQuant::nvfp4)
        fail_arg(std::string(kEntry) + ": desc.dispatch: got nvfp4 for a W4A16 layer, need bf16 (NVFP4 dispatch "
                 "is the layer's own W4A4 input quantization; a W4A16 layer must see bf16)");
      if (d.combine != WireDType::f32 && d.combine != WireDType::bf16)
        fail_arg(std::string(kEntry) + ": desc.combine: got " + to_string(d.combine) + ", need f32|bf16");
    }
    resolve_capacity(d.capacity, L, world, pl.n_max(), kEntry);
    n_local = pl.count(rank);
    if (local.w13.ndim != 3 || local.w13.shape[0] != n_local)
      detail::fail_tensor(kEntry, "local.w13", local.w13,
                          "u8 [" + std::to_string(n_local) + ", 2I, H/2]: the " + std::to_string(n_local) +
                              " experts of rank " + std::to_string(rank) + " (global " +
                              std::to_string(pl.first(rank)) + ".." + std::to_string(pl.first(rank) + n_local - 1) +
                              ")");
    if (local.expert_map.present())
      fail_arg(std::string(kEntry) + ": local.expert_map: got " + local.expert_map.describe() +
               ", need nothing (the placement decides it: ep::expert_map)");
    if (L.act_quant == ActQuant::nvfp4) {
      for (auto [name, t] : {std::pair{"local.w13_input_scale", &local.w13_input_scale},
                             std::pair{"local.w2_input_scale", &local.w2_input_scale}})
        detail::expect_tensor(kEntry, name, *t, DType::f32, {n_local}, detail::Place::anywhere());
      a13 = fetch_f32(local.w13_input_scale);
      a2 = fetch_f32(local.w2_input_scale);
      for (const std::vector<float>* v : {&a13, &a2})
        for (float s : *v)
          if (!(s > 0.0f) || !std::isfinite(s))
            fail_arg(std::string(kEntry) + ": local input scales: got " + std::to_string(s) +
                     ", need finite and > 0");
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::invalid_argument) throw;
    local_error = e.what();
  }
  check_agreement(kEntry, d, comm, device, local_error);

  CheckpointWeights w = local;
  const std::vector<int32_t> map = expert_map(L.num_experts, world, rank);
  w.expert_map = TensorView::of(map.data(), DType::i32, {L.num_experts});
  // W4A4: the layer takes the max input scale over experts; over all ranks' experts, so
  // that every rank quantizes exactly as the single-GPU layer does.
  float a13_max = 1.0f;
  if (L.act_quant == ActQuant::nvfp4) {
    auto local_max = [](const std::vector<float>& v) { return *std::max_element(v.begin(), v.end()); };
    a13_max = allreduce_max_positive(local_max(a13), comm, device);
    const float a2_max = allreduce_max_positive(local_max(a2), comm, device);
    std::fill(a13.begin(), a13.end(), a13_max);
    std::fill(a2.begin(), a2.end(), a2_max);
    w.w13_input_scale = TensorView::of(a13.data(), DType::f32, {n_local});
    w.w2_input_scale = TensorView::of(a2.data(), DType::f32, {n_local});
  }
  PrepareOptions o = options;
  o.device = device;
  // The local layer's own checks (the other checkpoint tensors) fail on one rank only:
  // one more agreement round lets every rank stop together.
  std::unique_ptr<Layer> prepared;
  std::string prepare_error;
  try {
    prepared = std::make_unique<Layer>(Layer::prepare(L, w, o));
    if (prepared->device() != DeviceType::cuda)
      fail_arg(std::string(kEntry) + ": options.backend: got " + prepared->backend() +
               " (a host backend), need a CUDA backend: NCCL moves device memory");
  } catch (const Error& e) {
    prepare_error = e.what();
  }
  check_agreement(kEntry, d, comm, device, prepare_error);
  Layer layer = std::move(*prepared);

  auto impl = std::make_unique<Impl>(std::move(layer));
  impl->desc = d;
  impl->comm = comm;
  impl->rank = rank;
  impl->world = world;
  impl->device = device;
  impl->pl = pl;
  impl->n_local = n_local;
  impl->n_max = pl.n_max();
  impl->a13_gs = 1.0f / a13_max;
  {
    DeviceGuard g(device);
    std::vector<int32_t> ident(size_t(L.num_experts));
    for (size_t e = 0; e < ident.size(); ++e) ident[e] = int32_t(e);
    FP4MOE_CUDA_CHECK(cudaMalloc(&impl->identity_map, ident.size() * 4));
    FP4MOE_CUDA_CHECK(cudaMemcpy(impl->identity_map, ident.data(), ident.size() * 4, cudaMemcpyHostToDevice));
  }
  impl->lay = impl->layout();
  return EpLayer(std::move(impl));
}

void EpLayer::set_capacity(const Capacity& capacity) {
  Capacity c = capacity;
  resolve_capacity(c, impl_->desc.layer, impl_->world, impl_->n_max, "EpLayer::set_capacity");
  EpDesc d = impl_->desc;
  d.capacity = c;
  check_agreement("EpLayer::set_capacity", d, impl_->comm, impl_->device);
  impl_->desc = d;
  impl_->lay = impl_->layout();
}

Traffic EpLayer::traffic() const {
  const Impl& m = *impl_;
  const size_t W = size_t(m.world), H = size_t(m.desc.layer.hidden);
  Traffic t;
  if (m.desc.mode == Mode::all_reduce) {
    // ring all-reduce: each rank sends 2 (W-1)/W of the buffer
    const size_t buf = size_t(m.desc.capacity.max_tokens) * H * 4;
    t.combine_bytes = W > 1 ? 2 * (W - 1) * buf / W : 0;
    t.remote_bytes = t.combine_bytes;
    return t;
  }
  const size_t C = size_t(m.desc.capacity.send_rows);
  const size_t row = m.desc.dispatch == WireDType::nvfp4 ? H / 2 + H / 16 : 2 * H;
  const size_t back = m.desc.combine == WireDType::f32 ? 4 * H : 2 * H;
  t.dispatch_bytes = W * (C * row + size_t(m.n_max) * 4);
  t.combine_bytes = W * C * back;
  t.remote_bytes = (W - 1) * (C * row + size_t(m.n_max) * 4 + C * back);
  return t;
}

void EpLayer::forward(const EpForwardArgs& a) const {
  const char* kEntry = "EpLayer::forward";
  const Impl& m = *impl_;
  const LayerDesc& L = m.desc.layer;
  const detail::Place here = detail::Place::cuda(m.device);
  const std::vector<DType> act = {DType::bf16, DType::f16, DType::f32};
  detail::expect_tensor(kEntry, "hidden_states", a.hidden_states, act, {detail::kAnyExtent, L.hidden}, here);
  const int64_t T = a.hidden_states.shape[0];
  if (T > m.desc.capacity.max_tokens)
    fail_arg(std::string(kEntry) + ": hidden_states: got " + std::to_string(T) + " tokens, need <= capacity.max_tokens (" +
             std::to_string(m.desc.capacity.max_tokens) + ")");
  detail::expect_tensor(kEntry, "topk_weights", a.topk_weights, DType::f32, {T, L.top_k}, here);
  detail::expect_tensor(kEntry, "topk_ids", a.topk_ids, DType::i32, {T, L.top_k}, here);
  detail::expect_tensor(kEntry, "out", a.out, act, {T, L.hidden}, here);
  detail::expect_workspace(kEntry, "workspace", a.workspace, m.lay.total, here);
  for (auto [name, t] : {std::pair{"hidden_states", &a.hidden_states}, std::pair{"topk_weights", &a.topk_weights},
                         std::pair{"topk_ids", &a.topk_ids}})
    detail::expect_disjoint(kEntry, "out", a.out, name, *t);
  detail::expect_disjoint(kEntry, "workspace", a.workspace, "out", a.out);
  for (auto [name, t] : {std::pair{"hidden_states", &a.hidden_states}, std::pair{"topk_weights", &a.topk_weights},
                         std::pair{"topk_ids", &a.topk_ids}})
    detail::expect_disjoint(kEntry, "workspace", a.workspace, name, *t);
  detail::expect_device_pointers(kEntry, {{"hidden_states", &a.hidden_states},
                                          {"topk_weights", &a.topk_weights},
                                          {"topk_ids", &a.topk_ids},
                                          {"out", &a.out},
                                          {"workspace", &a.workspace}});

  DeviceGuard g(m.device);
  auto stream = static_cast<cudaStream_t>(a.stream);
  char* ws = static_cast<char*>(a.workspace.data);
  if (m.desc.mode == Mode::all_to_all)
    m.forward_a2a(a, ws, stream);
  else
    m.forward_allreduce(a, ws, stream);
}

void EpLayer::Impl::forward_a2a(const EpForwardArgs& a, char* ws, cudaStream_t stream) const {
  const NcclApi& nc = nccl();
  const Layout& l = lay;
  const LayerDesc& L = desc.layer;
  const int64_t T = a.hidden_states.shape[0], k = L.top_k, H = L.hidden, E = L.num_experts;
  const int64_t C = desc.capacity.send_rows, M = desc.capacity.expert_rows, W = world;
  const bool fp4 = desc.dispatch == WireDType::nvfp4;
  const bool back_bf16 = desc.combine == WireDType::bf16;
  uint32_t* status = at<uint32_t>(ws, l.status);
  FP4MOE_CUDA_CHECK(cudaMemsetAsync(status, 0, kEpStatusWords * 4, stream));

  // 1. sender: group rows by destination rank and expert, one slab per rank
  int32_t* send_counts = at<int32_t>(ws, l.send_counts);
  cuda::PermuteArgs p;
  if (T > 0) {
    p.topk_ids = static_cast<const int32_t*>(a.topk_ids.data);
    p.expert_map = identity_map;
    p.T = T;
    p.k = k;
    p.E = E;
    p.num_local = E;
    p.status = status;
    p.begin = at<int32_t>(ws, l.begin);
    p.count = at<int32_t>(ws, l.count);
    p.row_token = at<int32_t>(ws, l.row_token);
    p.slot_row = at<int32_t>(ws, l.slot_row);
    p.scratch = at<int32_t>(ws, l.scratch);
    cuda::permute(p, stream);
    PackArgs pk;
    pk.pl = pl;
    pk.C = C;
    pk.n_max = n_max;
    pk.H = H;
    pk.begin = p.begin;
    pk.count = p.count;
    pk.row_token = p.row_token;
    pk.x = a.hidden_states.data;
    pk.x_dtype = a.hidden_states.dtype;
    pk.x_stride = a.hidden_states.stride[0];
    pk.send = at<uint16_t>(ws, l.send_bf16);
    pk.send_counts = send_counts;
    pk.status = status;
    pack(pk, stream);
    if (fp4)  // rows past a slab's count are quantized too (unused): one launch, no counts needed
      cuda::quantize_nvfp4_rows(pk.send, DType::bf16, W * C, H, a13_gs, at<uint8_t>(ws, l.send_fp4),
                                at<uint8_t>(ws, l.send_scale), stream);
  } else {
    FP4MOE_CUDA_CHECK(cudaMemsetAsync(send_counts, 0, size_t(W * n_max) * 4, stream));
  }

  // 2. dispatch: counts then slabs, to and from every rank (itself included), one group
  int32_t* recv_counts = at<int32_t>(ws, l.recv_counts);
  const size_t row_x = fp4 ? size_t(H / 2) : size_t(H) * 2, row_s = fp4 ? size_t(H / 16) : 0;
  const char* send_x = fp4 ? at<char>(ws, l.send_fp4) : at<char>(ws, l.send_bf16);
  char* recv_x = at<char>(ws, l.recv_x);
  FP4MOE_NCCL_CHECK(nc.GroupStart());
  for (int r = 0; r < W; ++r) {
    FP4MOE_NCCL_CHECK(nc.Send(send_counts + r * n_max, size_t(n_max), ncclInt32, r, comm, stream));
    FP4MOE_NCCL_CHECK(nc.Recv(recv_counts + r * n_max, size_t(n_max), ncclInt32, r, comm, stream));
    FP4MOE_NCCL_CHECK(nc.Send(send_x + size_t(r * C) * row_x, size_t(C) * row_x, ncclUint8, r, comm, stream));
    FP4MOE_NCCL_CHECK(nc.Recv(recv_x + size_t(r * C) * row_x, size_t(C) * row_x, ncclUint8, r, comm, stream));
    if (fp4) {
      FP4MOE_NCCL_CHECK(nc.Send(at<char>(ws, l.send_scale) + size_t(r * C) * row_s, size_t(C) * row_s, ncclUint8, r,
                                comm, stream));
      FP4MOE_NCCL_CHECK(nc.Recv(at<char>(ws, l.recv_scale) + size_t(r * C) * row_s, size_t(C) * row_s, ncclUint8, r,
                                comm, stream));
    }
  }
  FP4MOE_NCCL_CHECK(nc.GroupEnd());

  // 3. receiver: slabs -> batched format, the local experts, y rows -> slabs back
  LandArgs la;
  la.W = world;
  la.C = C;
  la.n_max = n_max;
  la.n_local = n_local;
  la.M = M;
  la.recv_counts = recv_counts;
  la.row_dest = at<int32_t>(ws, l.row_dest);
  la.slab_prefix = at<int32_t>(ws, l.slab_prefix);
  la.src_offset = at<int32_t>(ws, l.src_offset);
  la.expert_num_tokens = at<int32_t>(ws, l.ent);
  la.status = status;
  land_map(la, stream);
  scatter_rows(recv_x, la.row_dest, W * C, int64_t(row_x), at<char>(ws, l.bin_x), stream);
  if (fp4) scatter_rows(at<char>(ws, l.recv_scale), la.row_dest, W * C, int64_t(row_s), at<char>(ws, l.bin_scale), stream);

  BatchedArgs b;
  b.hidden_states = fp4 ? TensorView::of(ws + l.bin_x, DType::u8, {n_local, M, H / 2}, DeviceType::cuda, device)
                        : TensorView::of(ws + l.bin_x, DType::bf16, {n_local, M, H}, DeviceType::cuda, device);
  if (fp4) b.hidden_scale = TensorView::of(ws + l.bin_scale, DType::e4m3, {n_local, M, H / 16}, DeviceType::cuda, device);
  b.expert_num_tokens = TensorView::of(la.expert_num_tokens, DType::i32, {n_local}, DeviceType::cuda, device);
  b.out = TensorView::of(ws + l.y, DType::f32, {n_local, M, H}, DeviceType::cuda, device);
  if (l.inner_bytes)
    b.workspace = TensorView::of(ws + l.inner, DType::u8, {int64_t(l.inner_bytes)}, DeviceType::cuda, device);
  b.stream = stream;
  layer.forward_batched(b);
  gather_back(at<float>(ws, l.y), la.row_dest, W * C, H, back_bf16, ws + l.back_send, stream);

  // 4. combine: slabs back to the ranks the rows came from
  const size_t row_b = size_t(H) * (back_bf16 ? 2 : 4);
  FP4MOE_NCCL_CHECK(nc.GroupStart());
  for (int r = 0; r < W; ++r) {
    FP4MOE_NCCL_CHECK(nc.Send(ws + l.back_send + size_t(r * C) * row_b, size_t(C) * row_b, ncclUint8, r, comm, stream));
    FP4MOE_NCCL_CHECK(nc.Recv(ws + l.back_recv + size_t(r * C) * row_b, size_t(C) * row_b, ncclUint8, r, comm, stream));
  }
  FP4MOE_NCCL_CHECK(nc.GroupEnd());
  if (T == 0) return;
  EpCombineArgs c;
  c.pl = pl;
  c.T = T;
  c.k = k;
  c.H = H;
  c.C = C;
  c.topk_ids = p.topk_ids;
  c.topk_weights = static_cast<const float*>(a.topk_weights.data);
  c.slot_row = p.slot_row;
  c.begin = p.begin;
  c.back = ws + l.back_recv;
  c.back_bf16 = back_bf16;
  c.out = a.out.data;
  c.out_dtype = a.out.dtype;
  c.out_stride = a.out.stride[0];
  c.accumulate = a.accumulate;
  combine(c, stream);
}

void EpLayer::Impl::forward_allreduce(const EpForwardArgs& a, char* ws, cudaStream_t stream) const {
  const Layout& l = lay;
  const int64_t T = a.hidden_states.shape[0], H = desc.layer.hidden;
  FP4MOE_CUDA_CHECK(cudaMemsetAsync(ws + l.status, 0, kEpStatusWords * 4, stream));
  if (T == 0) return;  // every rank holds the same tokens, so every rank skips the collective
  float* partial = at<float>(ws, l.partial);
  ForwardArgs f;
  f.hidden_states = a.hidden_states;
  f.topk_weights = a.topk_weights;
  f.topk_ids = a.topk_ids;
  f.out = TensorView::of(partial, DType::f32, {T, H}, DeviceType::cuda, device);
  if (l.inner_bytes)
    f.workspace = TensorView::of(ws + l.inner, DType::u8, {int64_t(l.inner_bytes)}, DeviceType::cuda, device);
  f.stream = stream;
  layer.forward(f);
  FP4MOE_NCCL_CHECK(nccl().AllReduce(partial, partial, size_t(T * H), ncclFloat32, ncclSum, comm, stream));
  finish_sum(partial, T, H, a.out.data, a.out.dtype, a.out.stride[0], a.accumulate, stream);
}

void EpLayer::check_device_errors(const TensorView& workspace, void* stream_ptr) const {
  const Impl& m = *impl_;
  detail::expect_workspace("EpLayer::check_device_errors", "workspace", workspace, m.lay.total,
                           detail::Place::cuda(m.device));
  detail::expect_device_pointers("EpLayer::check_device_errors", {{"workspace", &workspace}});
  DeviceGuard g(m.device);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  char* ws = static_cast<char*>(workspace.data);
  uint32_t words[kEpStatusWords] = {};
  FP4MOE_CUDA_CHECK(cudaMemcpyAsync(words, ws + m.lay.status, sizeof(words), cudaMemcpyDeviceToHost, stream));
  FP4MOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (words[0] != 0) {
    FP4MOE_CUDA_CHECK(cudaMemsetAsync(ws + m.lay.status, 0, sizeof(words), stream));
    FP4MOE_CUDA_CHECK(cudaStreamSynchronize(stream));
    const Capacity& c = m.desc.capacity;
    std::string msg;
    if (words[0] & kEpSendOverflow)
      msg += "capacity.send_rows: got " + std::to_string(c.send_rows) + ", need >= " + std::to_string(words[1]) +
             " (rank " + std::to_string(m.rank) + " had that many rows for one rank; the rows past the capacity were "
             "not computed and contributed 0)";
    if (words[0] & kEpExpertOverflow)
      msg += std::string(msg.empty() ? "" : "; ") + "capacity.expert_rows: got " + std::to_string(c.expert_rows) +
             ", need >= " + std::to_string(words[2]) + " (a local expert of rank " + std::to_string(m.rank) +
             " received that many rows; the rows past the capacity were not computed and contributed 0)";
    if (words[0] & cuda::kStatusBadId)
      msg += std::string(msg.empty() ? "" : "; ") + "topk_ids: a value outside [-1, " +
             std::to_string(m.desc.layer.num_experts) + ") was seen on the device (those slots were treated as -1)";
    fail_arg(msg);
  }
  if (m.lay.inner_bytes)
    m.layer.check_device_errors(
        TensorView::of(ws + m.lay.inner, DType::u8, {int64_t(m.lay.inner_bytes)}, DeviceType::cuda, m.device),
        stream_ptr);
}

}  // namespace fp4moe::ep

#endif  // FP4MOE_WITH_EP
