// The grouped GEMMs of the CUDA backend: the interface between the pipeline
// (cuda_backend.cpp: route, permute, quantize, combine) and the GEMM kernels
// (gemm_naive.cu: the simple oracle; gemm_sm80_kernel.cuh: mma.sync; gemm_sm90.cu: wgmma).
//
// Row space. Both GEMMs run over a "row space": standard format = the permuted slots
// (rows of expert e are [begin[e], begin[e] + count[e]), experts one after another);
// batched format = e * M + r. GEMM 1 reads A row `a_gather[r]` (standard: the token
// index; batched: nullptr = r itself); GEMM 2 reads h row r. Outputs are indexed by r.
//
// Numerics (SPEC §4, "exact"): e2m1 x e4m3 (or x e8m0) is exact in bf16, so weight
// tiles are dequantized to bf16 without rounding, multiplied with bf16 activations on
// tensor cores with fp32 accumulation, and the fp32 global scales (weight dq_scale x
// activation dq_scale) are applied once to the fp32 sum.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "backend.hpp"
#include "cuda/common/env.hpp"

namespace fp4moe::cuda {

// Weights on the device in the GEMM kernels' private layout (documented in
// weights_cuda.cu next to its index functions). Built once by upload_weights.
class DeviceWeights {
 public:
  virtual ~DeviceWeights() = default;
  virtual size_t bytes() const = 0;  // device memory held
};
std::unique_ptr<DeviceWeights> upload_weights(const detail::HostWeights& w, int device);

// The k order of an activation row (x, h): logical, or k-permuted (gemm_internal.hpp
// kperm_index; a k-permuted row holds kperm_row(K) entries, zeros past K).
enum class KOrder { logical, kperm };
inline constexpr int64_t kperm_row(int64_t K) { return (K + 63) / 64 * 64; }

struct ExpertRows {
  const int32_t* begin = nullptr;    // device [E_local]: first row of expert e
  const int32_t* count = nullptr;    // device [E_local]: rows of expert e (0 allowed)
  int64_t rows_bound = 0;            // host: upper bound on sum(count) (T*k, or E_local*M)
  int64_t row_space = 0;             // host: size of the row space (outputs have this many rows)
  // optional, device [1 + E_local]: the number of experts with rows, then their ids in
  // ascending order (gemm_prepare_rows); paths that use it build it themselves when absent
  const int32_t* active = nullptr;
};

struct Gemm1Args {
  ExpertRows rows;
  // A, one of: bf16 rows [*, H] (W4A16, MXFP4), or NVFP4 rows (W4A4: data [*, H/2],
  // linear e4m3 scales [*, H/16], dq_scale a_dq).
  const uint16_t* a_bf16 = nullptr;
  const uint8_t* a_fp4 = nullptr;
  const uint8_t* a_scale = nullptr;
  float a_dq = 1.0f;
  const int32_t* a_gather = nullptr; // device [row_space] source row of A, or nullptr (identity)
  // NVFP4 A read through a_gather: how many rows A has (every a_gather[r] is below it). The
  // sm90 path dequantizes exactly these rows to bf16 first (at most row_space of them); 0
  // (unknown) sends such a GEMM to the fast path. Not read otherwise.
  int64_t a_rows = 0;
  // A (bf16) k-permuted (gemm_internal.hpp kperm_index: rows of kperm_row(H), zeros past H), as
  // the wgmma kernels read it; else logical, as the others do. With it, GEMM 1 must run the
  // wgmma kernels (else gemm1 fails naming it); without, the wgmma kernels decline.
  bool a_kperm = false;
  // h = act(gate, up) (+ biases), k-permuted (rows of Ir = kperm_row(I) entries, zeros past I:
  // what every GEMM 2 kernel reads), one of: bf16 [row_space, Ir], or NVFP4 requantized with
  // q_scale h_gs (W4A4: data [row_space, Ir/2], linear e4m3 scales [row_space, I/16], logical).
  uint16_t* h_bf16 = nullptr;
  uint8_t* h_fp4 = nullptr;
  uint8_t* h_scale = nullptr;
  // Or, alone, NVFP4 h (q_scale h_gs) as its values e2m1 * e4m3, exactly in bf16 [row_space, Ir]:
  // what gemm2 then takes as a_bf16 with a_dq = 1 / h_gs. Only on the paths that run NVFP4
  // activations as values (gemm_stages_activations).
  uint16_t* h_values = nullptr;
  float h_gs = 1.0f;
  // splitk, stream, sm90 and decode paths only: their scratch (splitk: fp32 per-split partial
  // sums; stream: the active-expert list; sm90 and decode with NVFP4 A: its bf16 copy, sm90
  // with NVFP4 h also a bf16 h), at least gemm_scratch_bytes(...) bytes; nullptr (or a shape
  // the path declines) runs the fast path (NVFP4 A decoded in its kernels).
  float* partials = nullptr;
  size_t partials_bytes = 0;
  // The op just before GEMM 1 on the stream is a kernel (the layer's forwards: the permute, the
  // batched counts or the A preparation). The decode kernel may then run as that kernel's
  // programmatic dependent (decode_pdl): it waits at its start, before reading anything, and
  // lets its own dependent (GEMM 2) start only after that wait.
  bool after_kernel = false;
  // One token (T = 1, standard format), given with after_kernel: its k top-k ids (device [k],
  // global; mapped through expert_map, device [num_experts]: global -> local or -1) and the
  // permute's slot_row (device [k]). The decode kernel then maps its CTAs to the k slots
  // itself, so it starts streaming its weights before the kernels before it have finished
  // (FP4MOE_DECODE_DIRECT=0: it waits for the permute's rows as at other T). The ids and the
  // map must be complete before the kernel before GEMM 1 started (the layer's inputs).
  struct OneToken {
    const int32_t* topk_ids = nullptr;
    const int32_t* expert_map = nullptr;
    int64_t num_experts = 0;
    int k = 0;
    const int32_t* slot_row = nullptr;
  } one_token;
};

struct Gemm2Args {
  ExpertRows rows;
  // A = h, as written by gemm1: k-permuted rows of kperm_row(I) (bf16, or NVFP4 with dq_scale
  // a_dq, its scales logical [*, I/16]).
  const uint16_t* a_bf16 = nullptr;
  const uint8_t* a_fp4 = nullptr;
  const uint8_t* a_scale = nullptr;
  float a_dq = 1.0f;
  float* y = nullptr;                // [row_space, H] fp32 (+ w2 bias); rows of no expert untouched
  float* partials = nullptr;         // splitk, stream, sm90 and decode paths only, as in Gemm1Args
  size_t partials_bytes = 0;
  // rows (begin, count) were complete before the kernel just before GEMM 2 let GEMM 2 start
  // (the layer's forwards: the permute or the batched counts run before GEMM 1, and the decode
  // GEMM 1 lets its dependent start only once it has waited for them). The decode kernel may
  // then run as that kernel's programmatic dependent and read its weights before waiting for h.
  bool rows_settled = false;
};

// decode (gemm_decode.cu): the smallest decode shapes (<= 8 rows per active expert, too few
// row tiles to fill the SMs), weights streamed through registers warp by warp, K split inside
// a CTA and summed in fixed order; splitk
// (gemm_splitk.cu): decode shapes split K across CTAs, a second kernel sums the splits in fixed
// order; stream (gemm_stream.cu): decode shapes streamed warp by warp over the whole K through
// shared memory; sm90 (gemm_sm90.cu): prefill shapes (>= 16 rows per active expert, MXFP4 >= 22) on Hopper
// wgmma, sm_90 devices only, NVFP4 activations (W4A4) staged through bf16 copies in its
// scratch (nvfp4_staging.cu). Other shapes run `fast` (mma.sync tiles, gemm_sm80_kernel.cuh). The
// default, sm90, runs the smallest decode shapes on the decode kernels and prefill shapes on wgmma
// (measured on the H200, bench/results/); splitk and stream measured slower than fast and are
// kept for comparison only.
enum class GemmPath { naive, fast, splitk, stream, sm90, decode };
// FP4MOE_GEMM=naive|fast|splitk|stream|sm90|decode forces that path (decode: the decode
// kernels where they take the shape, else fast); unset: sm90 (decode, wgmma, else fast).
GemmPath gemm_path();

// Scratch bytes (Gemm1Args/Gemm2Args::partials) that `path` needs for gemm1 and gemm2 of
// `rows_bound` rows in a row space of `row_space` rows; one buffer serves both GEMMs. sm90 and
// decode: non-zero only for a layer with NVFP4 activations: the bf16 copy of A (row_space x
// max(H, I)), and for sm90 where the wgmma kernels take the shape on the weights' device also
// GEMM 1's bf16 h (sm90_staging); the decision is the one gemm1/gemm2 make for the same rows.
size_t gemm_scratch_bytes(const DeviceWeights& w, GemmPath path, int64_t rows_bound, int64_t row_space);

// Whether `path` runs this layer's NVFP4 activations (W4A4) as their exact bf16 values (sm90
// and decode, gemm_dispatch.cpp): gemm1/gemm2 stage NVFP4 A given to them into the scratch,
// and a caller that has the activations unquantized can hand them over as those values at
// once (act_to_nvfp4_values) with a_dq. False for W4A16 layers.
bool gemm_stages_activations(const DeviceWeights& w, GemmPath path);

// Whether gemm1 runs the wgmma kernels at `rows_bound` rows on `path`: they read A k-permuted
// (Gemm1Args::a_kperm), so a caller that prepares A anyway writes it so (act_to_bf16,
// act_to_nvfp4_values with KOrder::kperm). NVFP4 A is staged so by gemm1 itself.
bool gemm1_reads_kperm(const DeviceWeights& w, GemmPath path, int64_t rows_bound);

// Bytes of fp32 partials the splitk path needs for gemm1 and gemm2 of `rows_bound` rows in a
// row space of `row_space` rows (the larger of the two; they run one after the other, so one
// buffer serves both). 0 when neither GEMM would split (they then run the fast path).
size_t splitk_partials_bytes(const DeviceWeights& w, int64_t rows_bound, int64_t row_space);

// Once per forward, after begin/count are written and before gemm1: derives what `path`
// wants to know about the rows once for both GEMMs (stream: the active-expert list, into
// the scratch, and rows.active pointing at it). A no-op for other paths.
void gemm_prepare_rows(const DeviceWeights& w, GemmPath path, ExpertRows& rows, float* scratch,
                       size_t scratch_bytes, cudaStream_t stream);

// Programmatic dependent launch along the decode chain (permute -> GEMM 1 -> GEMM 2 ->
// combine): on an sm_90+ device unless FP4MOE_DECODE_PDL=0 (read per call, for A/B runs and the
// tests in one process). Each kernel of the chain launched as a dependent waits for the kernel
// before it (griddepcontrol.wait) before reading anything that kernel or an earlier one wrote;
// the results are the same bits either way.
bool decode_pdl(int device);

void gemm1(const DeviceWeights& w, const Gemm1Args& args, GemmPath path, cudaStream_t stream);
// True when GEMM 2's last kernel lets a programmatic dependent start before it ends (the decode
// kernel, when decode_pdl): the caller may launch the next kernel as its dependent.
bool gemm2(const DeviceWeights& w, const Gemm2Args& args, GemmPath path, cudaStream_t stream);

}  // namespace fp4moe::cuda
