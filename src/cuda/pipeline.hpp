// The CUDA backend's pipeline around the grouped GEMMs (gemm.hpp):
//
//   route     router logits -> topk_ids, topk_weights              (route.cu)
//   permute   topk_ids -> per-expert row ranges and the two maps   (permute.cu)
//   quantize  activations -> bf16 or NVFP4 GEMM-1 input            (quantize.cu)
//   combine   y rows -> out, weighted sum over k in fixed order    (combine.cu)
//
// Every launcher takes device pointers, shapes and a stream, launches a fixed small
// number of kernels, never synchronises and never allocates, so a forward is
// capturable in a CUDA graph. Results are deterministic: no float atomics, and the
// only integer atomics count or set bits.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend.hpp"
#include "cuda/gemm.hpp"

namespace fp4moe::cuda {

// The kernels' code of a value dtype: 0 f32, 1 bf16, 2 f16; any other fails naming `arg`.
inline int value_dtype_code(DType t, const char* arg) {
  switch (t) {
    case DType::f32: return 0;
    case DType::bf16: return 1;
    case DType::f16: return 2;
    default:
      detail::fail_arg(std::string(arg) + ": dtype: got " + dtype_name(t) + ", need f32|bf16|f16");
  }
}

// Bits of the device status word (uint32 at the start of every workspace). Kernels
// set them with atomicOr; check_device_errors reads and clears them.
inline constexpr uint32_t kStatusBadId = 1u << 0;       // a topk_id outside [-1, E)
inline constexpr uint32_t kStatusCountOverM = 1u << 1;  // a batched count > M
inline constexpr uint32_t kStatusCountNegative = 1u << 2;  // a batched count < 0

// ---------------------------------------------------------------------------
// Routing (SPEC §4). args validated by the caller (src/api): logits f32 [T, E] and
// outputs [T, k] contiguous on the current device, 1 <= k <= E, E % n_group == 0.
// Ids are bit-identical to detail::route_reference.
// ---------------------------------------------------------------------------
void route(const RouteArgs& args);

// ---------------------------------------------------------------------------
// Permutation. Slot s = t*k + j of topk_ids [T, k] goes to local expert
// expert_map[id] (or nowhere for id -1, a non-local expert, or an id outside
// [-1, E), which also sets kStatusBadId). Row space = T*k permuted positions:
//   begin[e], count[e]  (E_local) int32: rows of local expert e are [begin, begin+count),
//                        experts in index order, slots inside an expert in s order;
//   row_token[pos]      (T*k) int32: the token of the slot at pos (gemm1's A gather);
//                        positions >= sum(count) are not written;
//   slot_row[s]         (T*k) int32: the position of slot s, or -1 (combine's map).
// scratch: permute_scratch_ints(T*k, E_local) int32, [chunk][local expert] (none up to
// kPermuteFusedSlots slots).
// ---------------------------------------------------------------------------
// The work split (permute.cu), by slots N = T*k and local experts L (permute_path):
//   fused    N <= permute_fused_slots(): one warp does everything, one launch;
//   block    N <= permute_block_slots(), where the CTA's per-warp counters fit (permute_block_warps
//            > 0): one CTA of up to 32 warps, each walking permute_block_warp_slots consecutive
//            slots, one launch;
//   chunked  otherwise: the slots cut into chunks, one CTA each, of permute_warps warps that each
//            walk permute_warp_slots consecutive slots; at most kPermuteMaxChunks chunks, so the
//            scan's walk over one expert's chunks stays short. A memset and 3 launches.
// Only N > kPermuteFusedSlots can take the chunked path, whatever the bounds: the workspace's
// scratch (permute_scratch_ints) does not depend on them.
// The bounds by default, from the H200 (notes v33; W4A16, qwen3-30b / qwen3-235b / gpt-oss-120b):
// the block kernel beat the fused one from 64 slots (qwen3-30b T = 32: -5%, qwen3-235b -2%) and the
// chunked path up to 4096 (qwen3-30b T = 64 / 128: -3.8 / -2.5%; T = 512 -0.3%), but lost to it
// at 8192 (qwen3-30b T = 1024: +2.2%).
inline constexpr int64_t kPermuteFusedSlots = 256;        // the fused kernel's most slots
inline constexpr int64_t kPermuteFusedDefault = 32;
inline constexpr int64_t kPermuteBlockSlots = 4096;
inline constexpr int64_t kPermuteBlockMaxWarps = 32;
inline constexpr int64_t kPermuteBlockMaxSteps = 8;     // 32-slot steps per warp, at most
inline constexpr int64_t kPermuteBlockSmem = 48 * 1024;  // the block kernel's counters + 32 ints
inline constexpr int64_t kPermuteMaxChunks = 128;
inline constexpr int64_t kPermuteMinWarpSlots = 128;
// Warps per chunk: as many as 32 KiB of per-warp counters (one int per local expert) hold, 1-8.
inline int64_t permute_warps(int64_t num_local) {
  return std::clamp<int64_t>(32 * 1024 / (4 * std::max<int64_t>(num_local, 1)), 1, 8);
}
inline int64_t permute_warp_slots(int64_t slots, int64_t num_local) {
  const int64_t per_chunk = (slots + kPermuteMaxChunks - 1) / kPermuteMaxChunks;
  const int64_t w = permute_warps(num_local);
  return std::max(kPermuteMinWarpSlots, ((per_chunk + w - 1) / w + 31) / 32 * 32);
}
inline int64_t permute_chunks(int64_t slots, int64_t num_local) {
  const int64_t chunk = permute_warps(num_local) * permute_warp_slots(slots, num_local);
  return (slots + chunk - 1) / chunk;
}
// The block kernel's warps for `slots` slots: one per 32 slots, at most kPermuteBlockMaxWarps and
// as many as kPermuteBlockSmem holds counters for (one int per local expert each); 0 where that
// leaves a warp more than kPermuteBlockMaxSteps steps (the chunked path then).
inline int64_t permute_block_warps(int64_t slots, int64_t num_local) {
  const int64_t by_smem = (kPermuteBlockSmem / 4 - 32) / std::max<int64_t>(num_local, 1);
  const int64_t w = std::min({kPermuteBlockMaxWarps, by_smem, std::max<int64_t>((slots + 31) / 32, 1)});
  return w >= 1 && w * 32 * kPermuteBlockMaxSteps >= slots ? w : 0;
}
inline int64_t permute_block_warp_slots(int64_t slots, int64_t warps) {
  return ((slots + warps - 1) / warps + 31) / 32 * 32;
}
inline int64_t permute_scratch_ints(int64_t slots, int64_t num_local) {
  return slots > kPermuteFusedSlots ? permute_chunks(slots, num_local) * num_local : 0;
}

struct PermuteArgs {
  const int32_t* topk_ids = nullptr;   // (T, k)
  const int32_t* expert_map = nullptr; // (E) global -> local or -1
  int64_t T = 0, k = 0, E = 0, num_local = 0;
  uint32_t* status = nullptr;          // zeroed by permute (in the fused or block kernel, or a memset
                                       // before the three), then kStatusBadId ORed in
  int32_t* begin = nullptr;            // (E_local)
  int32_t* count = nullptr;            // (E_local)
  int32_t* row_token = nullptr;        // (T*k)
  int32_t* slot_row = nullptr;         // (T*k)
  int32_t* scratch = nullptr;          // (permute_scratch_ints)
  // Launch the one-kernel permute (permute_one_kernel) as the programmatic dependent of the
  // kernel just before it on the stream, which must not read or write what the permute writes
  // (the activation preparation). It waits for that grid at its end, so that a dependent of the
  // permute that waits for it also waits for that grid. Ignored on the three-kernel path.
  bool dependent = false;
};
// True when its last op was a kernel (N > 0, L > 0): the next may be launched as its
// programmatic dependent (Gemm1Args::after_kernel).
bool permute(const PermuteArgs& a, cudaStream_t stream);
enum class PermutePath { fused, block, chunked };
// The bounds of the fused and block kernels: kPermuteFusedDefault / kPermuteBlockSlots, unless the
// environment (FP4MOE_PERMUTE_FUSED_SLOTS, at most kPermuteFusedSlots; FP4MOE_PERMUTE_BLOCK_SLOTS,
// 0: no block kernel; A/B runs, read once) or a test's setter (-1: back to those) says otherwise.
int64_t permute_fused_slots();
int64_t permute_block_slots();
void set_permute_bounds(int64_t fused_slots, int64_t block_slots);
PermutePath permute_path(int64_t slots, int64_t num_local);
// Whether permute() runs as one kernel (PermuteArgs::dependent applies): the fused or the block
// kernel, with at least one slot and one local expert.
inline bool permute_one_kernel(int64_t slots, int64_t num_local) {
  return slots > 0 && num_local > 0 && permute_path(slots, num_local) != PermutePath::chunked;
}

// Batched format: begin[e] = e*M, count[e] = expert_num_tokens[e] clamped to [0, M]
// (out-of-range counts set kStatusCountOverM / kStatusCountNegative).
void batched_rows(const int32_t* expert_num_tokens, int64_t num_local, int64_t M,
                  uint32_t* status, int32_t* begin, int32_t* count, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Activation preparation. Source rows: x (rows, K) of f32|bf16|f16 with row stride
// row_stride elements (inner dim contiguous). Each value is first rounded to bf16
// (SPEC §4: inputs are taken as bf16), then, when row_weight is given, replaced by
// round_bf16(x * row_weight[r * weight_stride]) (apply_router_weight_on_input).
// When group_count is given the rows are groups of M (batched format) and row
// e*M + r is touched only if r < group_count[e].
// ---------------------------------------------------------------------------
struct ActRows {
  const void* x = nullptr;
  DType dtype = DType::bf16;
  int64_t rows = 0, K = 0, row_stride = 0;
  const float* row_weight = nullptr;
  int64_t weight_stride = 1;
  const int32_t* group_count = nullptr;
  int64_t M = 0;
};
// -> out (rows, K) bf16, contiguous; KOrder::kperm: k-permuted, rows of kperm_row(K) with
// zeros past K (gemm_internal.hpp kperm_index: the wgmma kernels' A, Gemm1Args::a_kperm).
void act_to_bf16(const ActRows& src, uint16_t* out, cudaStream_t stream, KOrder order = KOrder::logical);
// -> NVFP4 with q_scale gs: data (rows, K/2), linear e4m3 scale (rows, K/16). K % 16 == 0.
void act_to_nvfp4(const ActRows& src, float gs, uint8_t* data, uint8_t* scale, cudaStream_t stream);
// -> out (rows, K) bf16, 16-byte aligned: the values act_to_nvfp4 quantizes to, e2m1 * e4m3
// without the q_scale, exactly (nvfp4_value_bf16): for the GEMM paths that run W4A4 on bf16
// activations (gemm_stages_activations), quantization and staging in one pass. K % 16 == 0.
// KOrder::kperm: k-permuted, as act_to_bf16's.
void act_to_nvfp4_values(const ActRows& src, float gs, uint16_t* out, cudaStream_t stream,
                         KOrder order = KOrder::logical);

// The plain tensor quantizer: x (rows, K) contiguous f32|bf16|f16, values taken as
// they are (no bf16 rounding), bit-exact with detail::nvfp4_quantize_rows on the same
// values. data (rows, K/2), scale (rows, K/16).
void quantize_nvfp4_rows(const void* x, DType dt, int64_t rows, int64_t K, float gs, uint8_t* data,
                         uint8_t* scale, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Combine (standard format):
//   out[t] = round_out( (accumulate ? out[t] : 0) + sum_{j valid} w_j * y[slot_row[t*k+j]] )
// fp32, j in order 0..k-1, products and sums not fused; w_j = 1 when unweighted
// (apply_router_weight_on_input). out (T, H) f32|bf16|f16 with row stride out_stride.
// ---------------------------------------------------------------------------
struct CombineArgs {
  const float* y = nullptr;            // (T*k, H) fp32, permuted rows
  const int32_t* slot_row = nullptr;   // (T*k)
  const float* topk_weights = nullptr; // (T, k), or nullptr for weight 1
  int64_t T = 0, k = 0, H = 0;
  void* out = nullptr;
  DType out_dtype = DType::bf16;
  int64_t out_stride = 0;
  bool accumulate = false;
  // launched as the programmatic dependent of the kernel before it (gemm2 returned true): it
  // waits for that kernel at its start, so it reads nothing early; only its launch overlaps
  bool dependent = false;
};
void combine(const CombineArgs& a, cudaStream_t stream);

// Batched writeback: out[e, r] = round_out(y[e*M + r]) for r < count[e] (clamped
// counts); other rows untouched. out (E_local, M, H) contiguous.
// `dependent`: as in CombineArgs.
void batched_writeback(const float* y, const int32_t* count, int64_t num_local, int64_t M, int64_t H,
                       void* out, DType out_dtype, bool dependent, cudaStream_t stream);

// cudaFuncGetAttributes on a pipeline kernel for the current device: cudaSuccess when
// this build holds a kernel image the device can run.
cudaError_t probe_kernel_image();

}  // namespace fp4moe::cuda
