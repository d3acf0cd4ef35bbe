// The EP-specific kernels around NCCL (ep_layer.cpp has the data flow). Launchers take
// device pointers and a stream, never synchronise, never allocate.
//
// Placement (ep.hpp): rank d holds global experts [first(d), first(d) + n(d)), the first
// E % W ranks one more than the others; n_max = ceil(E / W).
// Slabs: every transfer between two ranks is a fixed slab of C = send_rows rows; rows of
// a slab are grouped by the destination's local expert, in expert order, and inside an
// expert in slot order s = t*k + j (the permute's order), so everything is deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ep/placement.hpp"
#include "fp4moe/fp4moe.hpp"

namespace fp4moe::ep {

// Status words at the start of the EP workspace (uint32 each). Bits of word 0:
inline constexpr uint32_t kEpSendOverflow = 1u << 8;    // a slab needed more than C rows
inline constexpr uint32_t kEpExpertOverflow = 1u << 9;  // an expert received more than M rows
// word 0: bits (cuda::kStatusBadId from the permute, kEp*), word 1: the most rows one slab
// needed, word 2: the most rows one local expert needed.
inline constexpr int kEpStatusWords = 3;


// ---------------------------------------------------------------------------
// Dispatch, sender side. begin/count (E) and row_token/slot_row come from cuda::permute
// over the global experts (identity map), so rank d's rows are the contiguous positions
// [begin[first(d)], begin[first(d)] + total(d)).
// ---------------------------------------------------------------------------
struct PackArgs {
  Placement pl;
  int64_t C = 0, n_max = 0, H = 0;
  const int32_t* begin = nullptr;      // (E)
  const int32_t* count = nullptr;      // (E)
  const int32_t* row_token = nullptr;  // (T*k)
  const void* x = nullptr;             // (T, H) f32|bf16|f16, row stride x_stride
  DType x_dtype = DType::bf16;
  int64_t x_stride = 0;
  uint16_t* send = nullptr;            // (W, C, H) bf16: x rows rounded to bf16 (SPEC §4)
  int32_t* send_counts = nullptr;      // (W, n_max): rows per destination expert, clamped to the slab
  uint32_t* status = nullptr;          // kEpStatusWords
};
void pack(const PackArgs& a, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Receiver side. recv_counts (W, n_max) says how many rows of each source's slab belong
// to each local expert. Row i of the slab from source s, inside expert e's group, goes to
// batched row e*M + (rows of e from sources < s) + (its index inside the group): sources
// in rank order, so the batched input is deterministic.
// ---------------------------------------------------------------------------
struct LandArgs {
  int W = 1;
  int64_t C = 0, n_max = 0, n_local = 0, M = 0;
  const int32_t* recv_counts = nullptr;  // (W, n_max)
  int32_t* row_dest = nullptr;           // (W, C): batched row of each slab row, or -1
  int32_t* slab_prefix = nullptr;        // (W, n_max + 1) scratch: first slab row of each expert
  int32_t* src_offset = nullptr;         // (W, n_max) scratch: rows of expert e from sources < s
  int32_t* expert_num_tokens = nullptr;  // (n_local), clamped to M
  uint32_t* status = nullptr;
};
// Fills row_dest and expert_num_tokens, flags kEpExpertOverflow.
void land_map(const LandArgs& a, cudaStream_t stream);

// dst[row_dest[r]] = src[r] for rows with row_dest >= 0; row_bytes % 4 == 0.
void scatter_rows(const void* src, const int32_t* row_dest, int64_t rows, int64_t row_bytes, void* dst,
                  cudaStream_t stream);

// back[r] = y[row_dest[r]] as f32 or rounded to bf16 (back_bf16), or 0 where row_dest < 0
// (rows past a slab's count, or dropped by an expert overflow). y (n_local*M, H) f32.
void gather_back(const float* y, const int32_t* row_dest, int64_t rows, int64_t H, bool back_bf16, void* back,
                 cudaStream_t stream);

// ---------------------------------------------------------------------------
// Combine on the sender: out[t] = round_out((accumulate ? out[t] : 0) + sum_j w_j * y_j) in
// the order j = 0..k-1, fp32, not fused (as cuda::combine), where y_j is row
// slot_row[s] - begin[first(d)] of the slab that came back from d = owner(id). Slots with
// no expert, or past the slab (send overflow), contribute exactly 0.
// ---------------------------------------------------------------------------
struct EpCombineArgs {
  Placement pl;
  int64_t T = 0, k = 0, H = 0, C = 0;
  const int32_t* topk_ids = nullptr;     // (T, k)
  const float* topk_weights = nullptr;   // (T, k)
  const int32_t* slot_row = nullptr;     // (T*k)
  const int32_t* begin = nullptr;        // (E)
  const void* back = nullptr;            // (W, C, H) f32 | bf16
  bool back_bf16 = false;
  void* out = nullptr;
  DType out_dtype = DType::bf16;
  int64_t out_stride = 0;
  bool accumulate = false;
};
void combine(const EpCombineArgs& a, cudaStream_t stream);

// all_reduce mode: out[t] = round_out((accumulate ? out[t] : 0) + sum[t]); sum (T, H) f32.
void finish_sum(const float* sum, int64_t T, int64_t H, void* out, DType out_dtype, int64_t out_stride,
                bool accumulate, cudaStream_t stream);

}  // namespace fp4moe::ep
