// fp4moe::ep — one MoE layer spread over several GPUs by experts (expert parallelism),
// communicating over NCCL. docs/ep.md has the data flow, the cost model and how it scales.
//
// Placement: of E global experts, rank r holds the contiguous range
// [first_expert(r), first_expert(r) + num_local_experts(r)); the first E % world ranks hold
// one expert more. Each rank prepares only its own experts' weights.
//
// Two modes:
//   all_to_all  every rank brings its own tokens. Rows go to the ranks that own their
//               experts (ncclSend/ncclRecv, bf16 or NVFP4), land in the batched format, run
//               through the local experts, come back as fp32 (or bf16) and are combined with
//               the routing weights in the fixed order j = 0..k-1: with fp32 return the
//               output is bit-identical to the single-GPU layer on the same tokens.
//   all_reduce  every rank holds the same tokens; each runs its local experts (standard
//               format with expert_map) into fp32 partial sums, which ncclAllReduce adds;
//               the output dtype rounding comes after the sum. Equal to the single-GPU layer
//               up to the order of the fp32 sum over ranks.
//
// Every transfer has a fixed size set at setup (Capacity), so forward never synchronises
// with the host and can be captured in a CUDA graph. Rows that do not fit are never dropped
// silently: the device records the overflow and check_device_errors reports it with the
// counts that were needed.
//
// NCCL is loaded at run time (libnccl.so.2, or FP4MOE_NCCL_LIB); builds without nccl.h
// compile EP out, and then every entry here throws Error(unsupported) saying so.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp4moe/fp4moe.hpp"

// nccl.h's own declaration, repeated so that this header does not need nccl.h.
typedef struct ncclComm* ncclComm_t;

namespace fp4moe::ep {

// "" when expert parallelism can run here, else why not (compiled out, libnccl.so.2 not found).
std::string why_unavailable();
// The loaded NCCL's version as "2.27.3", or "" when none is loaded.
std::string nccl_version();

// ---------------------------------------------------------------------------
// Placement (host functions, no NCCL needed)
// ---------------------------------------------------------------------------
int64_t num_local_experts(int64_t num_experts, int world, int rank);
int64_t first_expert(int64_t num_experts, int world, int rank);
int owner_rank(int64_t num_experts, int world, int64_t expert);
// (E) int32: global expert -> local index on `rank`, or -1.
std::vector<int32_t> expert_map(int64_t num_experts, int world, int rank);

// ---------------------------------------------------------------------------
// Communicators, for callers that do not bring their own ncclComm_t
// ---------------------------------------------------------------------------
struct UniqueId {
  std::array<char, 128> bytes{};  // an ncclUniqueId, to be sent to every rank by the caller
};
UniqueId unique_id();

class Communicator {
 public:
  // One rank of a world spread over processes (or threads): collective over the world.
  // Makes `device` current on the calling thread.
  static Communicator init_rank(const UniqueId& id, int world, int rank, int device);
  // Every rank in this process, one per device (ncclCommInitAll); rank i drives devices[i].
  static std::vector<Communicator> init_all(const std::vector<int>& devices);

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  int device() const { return device_; }

 private:
  Communicator(ncclComm_t comm, int rank, int world, int device)
      : comm_(comm), rank_(rank), world_(world), device_(device) {}
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, world_ = 0, device_ = 0;
};

// ---------------------------------------------------------------------------
// The layer
// ---------------------------------------------------------------------------
enum class Mode : uint8_t { all_to_all, all_reduce };
enum class WireDType : uint8_t {
  bf16,   // dispatch: x rounded to bf16 (what the layer takes anyway); return: y rounded to bf16
  nvfp4,  // dispatch only, W4A4 layers: x quantized with the layer's input scale (~3.5x fewer bytes)
  f32,    // return only: y as the GEMM produced it, so the combine is exact (the default)
};
const char* to_string(Mode);
const char* to_string(WireDType);

// Fixed sizes of one forward, the same on every rank (checked across ranks at setup).
struct Capacity {
  int64_t max_tokens = 0;   // T of one forward on one rank, upper bound (>= 1)
  // all_to_all only; 0 picks the size that can never overflow.
  int64_t send_rows = 0;    // rows one rank sends to one rank; 0: max_tokens * min(k, max E_local)
  int64_t expert_rows = 0;  // rows one local expert receives from all ranks; 0: world * max_tokens
};

struct EpDesc {
  LayerDesc layer;                       // the whole layer: num_experts is the global E
  Mode mode = Mode::all_to_all;
  WireDType dispatch = WireDType::bf16;  // bf16 | nvfp4 (W4A4 layers)
  WireDType combine = WireDType::f32;    // f32 (exact) | bf16 (half the bytes back, one more rounding)
  Capacity capacity;
};

struct EpForwardArgs {
  // all_to_all: this rank's own tokens, T <= max_tokens, T may differ between ranks.
  // all_reduce: the same T tokens on every rank.
  TensorView hidden_states;  // [T, H] bf16 | f16 | f32 on the layer's device
  TensorView topk_weights;   // [T, k] f32
  TensorView topk_ids;       // [T, k] i32, global ids in [0, E) or -1
  TensorView out;            // [T, H] bf16 | f16 | f32, every element written
  TensorView workspace;      // u8 [>= workspace_size()] on the layer's device
  bool accumulate = false;   // out += layer(x)
  void* stream = nullptr;    // cudaStream_t; the NCCL calls are enqueued on it too
};

// Bytes one forward moves, per rank, with the fixed-size transfers.
struct Traffic {
  size_t dispatch_bytes = 0;  // to all ranks, itself included
  size_t combine_bytes = 0;   // back to all ranks, itself included
  size_t remote_bytes = 0;    // both ways, without the rank's transfer to itself
};

class EpLayer {
 public:
  // Collective: every rank of `comm` calls it. `local` holds this rank's experts only
  // (num_local_experts(E, world, rank) along dim 0, in global order) and no expert_map.
  // W4A4: the activation scales used are the max over all ranks' experts, as on one GPU.
  // options.device is ignored: the layer lives on comm's device.
  static EpLayer prepare(const EpDesc& desc, const CheckpointWeights& local, ncclComm_t comm,
                         const PrepareOptions& options = {});
  EpLayer(EpLayer&&) noexcept;
  EpLayer& operator=(EpLayer&&) noexcept;
  ~EpLayer();

  const EpDesc& desc() const;              // capacity with its defaults resolved
  int rank() const;
  int world() const;
  int device_id() const;
  int64_t num_local_experts() const;
  const Layer& local_layer() const;        // this rank's experts (the single-GPU layer)

  // Collective: new fixed sizes (defaults resolved as in EpDesc), same on every rank.
  void set_capacity(const Capacity& capacity);

  size_t workspace_size() const;
  Traffic traffic() const;

  // Collective in order: every rank calls forward the same number of times.
  void forward(const EpForwardArgs& args) const;

  // Overflowed capacities (with the rows that were needed), ids out of range: recorded on
  // the device by forward, reported here (synchronises `stream`, clears the record).
  void check_device_errors(const TensorView& workspace, void* stream = nullptr) const;

  struct Impl;

 private:
  explicit EpLayer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4moe::ep
