// NVFP4 <-> bf16 row conversions that let the wgmma GEMMs (gemm_sm90.cu), which read bf16
// activations only, serve W4A4 layers exactly (gemm_internal.hpp, "staging through bf16"):
//   stage_nvfp4_to_bf16  A (GEMM 1) or h (GEMM 2) NVFP4 -> bf16, value e2m1 * e4m3 exactly,
//                        logical or k-permuted (KOrder; h is k-permuted, gemm_internal.hpp kperm)
//   stage_bf16_to_nvfp4  GEMM 1's bf16 h -> NVFP4 with q_scale h_gs, the arithmetic of the fast
//                        path's GEMM-1 epilogue (gemm_sm80_core.cuh epilogue_gemm1), k-permuted
//   stage_bf16_to_nvfp4_values  the same requantization, its values written back over h
// Plain CUDA (any architecture); meant to be memory-bound: one warp per (row, run of 256
// elements), each lane 8 consecutive elements (4 bytes of codes, 16 bytes of bf16), or on
// k-permuted rows 16 (one block: eight 4-byte pairs, which a warp's lanes read as 16-byte runs
// of 8 k-blocks), so a decode step's few rows still spread over many warps (one warp per whole
// row took 24 us for kimi-k2's single A row at T = 1 on the H200).
//
// Why not quantize.cu's nvfp4_rows_kernel for the requantization: its block amax starts from
// 0 (amax_update), the epilogue's from the block's own elements (fmaxf). Both skip NaN
// elements and agree on every block but one whose 16 values are all NaN (epilogue: amax NaN,
// scale code 0x7F; quantizer: amax 0, code 0). This file follows the epilogue.
#include <algorithm>
#include <cstdint>

#include "cuda/common/check.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxCtas = 2048;  // runs are walked grid-stride: ~16 CTAs per SM keep every SM busy
constexpr int kRunSteps = 32;   // 8-element steps per warp run: one per lane
static_assert(kNvfp4Block == 16, "a lane step of 16 elements is one NVFP4 block");

// The rows one launch walks: rows [0, dense) when dense > 0, else the rows of the experts of
// (begin, count), numbered expert after expert (live row q of expert e is begin[e] + q - first[e]).
struct Walk {
  const int32_t* begin;
  const int32_t* count;
  int num_experts;
  int64_t dense;
};

// LIVE only, all threads: first[e] = sum of max(count, 0) over the experts before e, e <= E,
// in shared memory (warp 0 scans, then a barrier). Returns the number of rows to walk.
template <bool LIVE>
__device__ __forceinline__ int64_t walk_begin(const Walk& wk, int32_t* first) {
  if constexpr (!LIVE) {
    return wk.dense;
  } else {
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      int32_t base = 0;
      for (int e0 = 0; e0 < wk.num_experts; e0 += 32) {
        const int e = e0 + lane;
        const int32_t c = e < wk.num_experts ? max(wk.count[e], 0) : 0;
        const int32_t incl = ptx::warp_inclusive_sum(c, lane);
        if (e < wk.num_experts) first[e] = base + incl - c;
        base += __shfl_sync(0xFFFFFFFFu, incl, 31);
      }
      if (lane == 0) first[wk.num_experts] = base;
    }
    __syncthreads();
    return first[wk.num_experts];
  }
}

// The row of walk index q (< the count walk_begin returned), called by all 32 lanes of a warp
// with the same q. The expert is the last e with first[e] <= q (first[] is nondecreasing; an
// empty expert's first equals the next one's); the warp narrows its range 32-fold a step: each
// lane tests one chunk's start and the lanes that hold are a prefix (2 steps at 128 experts,
// where a binary search took 7 of ~13 instructions each, a quarter of the item's).
template <bool LIVE>
__device__ __forceinline__ int64_t walk_row(const Walk& wk, const int32_t* first, int64_t q) {
  if constexpr (!LIVE) {
    return q;
  } else {
    const int lane = threadIdx.x % 32;
    int base = 0, span = wk.num_experts;  // the expert is in [base, base + span); first[base] <= q
    while (span > 1) {
      const int step = (span + 31) / 32;
      const int off = lane * step;
      const unsigned held = __ballot_sync(0xFFFFFFFFu, off < span && first[base + off] <= q);
      const int k = __popc(held) - 1;
      base += k * step;
      span = min(step, span - k * step);
    }
    return int64_t(wk.begin[base]) + (q - first[base]);
  }
}

// Warp runs per row of K elements, kStep elements a lane step.
template <int kStep>
__host__ __device__ __forceinline__ int64_t runs_per_row(int64_t K) {
  return (K / kStep + kRunSteps - 1) / kRunSteps;
}

// Every thread of the launch: the walk's rows cut into runs of kRunSteps kStep-element steps,
// one warp per (row, run), grid-stride; body(r, c) for row r and the lane's step c (c may be
// past K / kStep in a row's last run: the body decides).
// The warp's (row, run) position advances by the grid's warps each step, as a row and a run
// step: two divisions per warp, not per item (per item they were ~40 of the requantizing
// loop's ~425 instructions, sm_90a).
template <bool LIVE, int kStep, class Body>
__device__ __forceinline__ void for_each_run(const Walk& wk, int64_t K, Body body) {
  extern __shared__ int32_t first[];
  const int64_t n = walk_begin<LIVE>(wk, first);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t runs = runs_per_row<kStep>(K);
  const int64_t start = int64_t(blockIdx.x) * kWarps + warp, stride = int64_t(gridDim.x) * kWarps;
  const int64_t row_step = stride / runs, run_step = stride % runs;
  int64_t q = start / runs, run = start % runs;
  while (q < n) {
    body(walk_row<LIVE>(wk, first, q), run * kRunSteps + lane);
    q += row_step;
    run += run_step;
    if (run >= runs) {
      run -= runs;
      ++q;
    }
  }
}

// out [*, K] bf16 <- fp4 [*, K/2], scale [*, K/16]. Lane step c: elements 8c..8c+7. Logical
// rows in and out (GEMM 1's x for the mma.sync kernels).
template <bool LIVE>
__global__ void __launch_bounds__(kThreads) nvfp4_to_bf16_kernel(const uint8_t* __restrict__ fp4,
                                                                 const uint8_t* __restrict__ scale, int64_t K,
                                                                 Walk wk, uint16_t* __restrict__ out) {
  for_each_run<LIVE, 8>(wk, K, [&](int64_t r, int64_t c) {
    if (c >= K / 8) return;
    const uint32_t codes = *reinterpret_cast<const uint32_t*>(fp4 + r * (K / 2) + c * 4);  // 8 e2m1, low nibble first
    const float s = e4m3_to_f32(scale[r * (K / 16) + c / 2]);
    uint32_t v[4];
    nvfp4_values_bf16x8(codes, s, v);
    *reinterpret_cast<uint4*>(out + r * K + c * 8) = make_uint4(v[0], v[1], v[2], v[3]);
  });
}

// The same into k-permuted rows of Kp (gemm_internal.hpp kperm_index; zeros past K), from
// logical (in_kperm false: GEMM 1's x for the wgmma kernels) or k-permuted (GEMM 2's h) codes.
// Lane step c: the 16-block of logical k 16c .. 16c + 15, eight pairs (a pair stays whole), pair
// m at kperm_block_at(c) + 8m; logical codes by one 8-byte load (a_fp4 is 8-byte aligned,
// check_a, and K % 16 == 0), k-permuted ones a byte each, 4 apart.
template <bool LIVE>
__global__ void __launch_bounds__(kThreads) nvfp4_to_bf16_kperm_kernel(const uint8_t* __restrict__ fp4,
                                                                       const uint8_t* __restrict__ scale, int64_t K,
                                                                       bool in_kperm, Walk wk,
                                                                       uint16_t* __restrict__ out) {
  const int64_t Kp = kperm_row(K), in_row = in_kperm ? Kp : K;
  for_each_run<LIVE, 16>(wk, Kp, [&](int64_t r, int64_t c) {
    if (c >= Kp / 16) return;
    const int64_t at = kperm_block_at(c);
    uint32_t word[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    if (c < K / 16) {
      const float s = e4m3_to_f32(scale[r * (K / 16) + c]);
      uint8_t code[8];
      if (in_kperm) {
        const uint8_t* in = fp4 + r * (in_row / 2) + at / 2;
#pragma unroll
        for (int m = 0; m < 8; ++m) code[m] = in[4 * m];
      } else {
        const uint2 w = *reinterpret_cast<const uint2*>(fp4 + r * (in_row / 2) + 8 * c);
#pragma unroll
        for (int m = 0; m < 8; ++m) code[m] = uint8_t((m < 4 ? w.x : w.y) >> (8 * (m % 4)));
      }
#pragma unroll
      for (int m = 0; m < 8; ++m)
        word[m] = uint32_t(nvfp4_value_bf16(uint8_t(code[m] & 15u), s)) |
                  uint32_t(nvfp4_value_bf16(uint8_t(code[m] >> 4), s)) << 16;
    }
    uint16_t* o = out + r * Kp + at;
#pragma unroll
    for (int m = 0; m < 8; ++m) *reinterpret_cast<uint32_t*>(o + 8 * m) = word[m];
  });
}

// epilogue_gemm1's block amax over x[0..N): fmaxf over |x|, any order (fmaxf skips NaN; NaN
// only when all are).
template <int N>
__device__ __forceinline__ float abs_max(const float* x) {
  float amax = fabsf(x[0]);
#pragma unroll
  for (int j = 1; j < N; ++j) amax = fmaxf(amax, fabsf(x[j]));
  return amax;
}

// The 16 bf16 of h's logical block c (k-permuted, gemm_internal.hpp kperm_index: eight pairs,
// pair m at kperm_block_at(c) + 8m) from `blk`, that block's base in its row, as fp32.
__device__ __forceinline__ void load_kperm_block(const uint16_t* blk, float (&x)[16]) {
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(blk + 8 * m);
    x[2 * m] = bf16_to_f32(uint16_t(w));
    x[2 * m + 1] = bf16_to_f32(uint16_t(w >> 16));
  }
}

// fp4 [*, Kp/2] (k-permuted, zeros past K), scale [*, K/16] <- h [*, Kp] bf16 (k-permuted),
// q_scale gs: the arithmetic of epilogue_gemm1's requantization. A lane per 16-block.
__global__ void __launch_bounds__(kThreads) bf16_to_nvfp4_kernel(const uint16_t* __restrict__ h, int64_t K, Walk wk,
                                                                 float gs, uint8_t* __restrict__ fp4,
                                                                 uint8_t* __restrict__ scale) {
  const int64_t Kp = kperm_row(K);
  for_each_run<true, 16>(wk, Kp, [&](int64_t r, int64_t c) {
    if (c >= Kp / 16) return;
    const int64_t at = kperm_block_at(c);
    uint8_t* o = fp4 + r * (Kp / 2) + at / 2;  // pair m's byte at o + 4m
    if (c >= K / 16) {  // the row's padding: zero codes
#pragma unroll
      for (int m = 0; m < 8; ++m) o[4 * m] = 0;
      return;
    }
    float x[16];
    load_kperm_block(h + r * Kp + at, x);
    const uint8_t sc = nvfp4_scale_code(abs_max<16>(x), gs);
    const float inv = nvfp4_inv_scale(sc, gs);
#pragma unroll
    for (int m = 0; m < 8; ++m) o[4 * m] = pack_e2m1(e2m1_from_f32(x[2 * m] * inv), e2m1_from_f32(x[2 * m + 1] * inv));
    scale[r * (K / 16) + c] = sc;
  });
}

// h [*, Kp] bf16 (k-permuted), in place <- the values e2m1 * e4m3 of its requantization with
// q_scale gs (bf16_to_nvfp4_kernel's codes and scales as nvfp4_value_bf16, without the q_scale;
// computed without the codes, nvfp4_requant_values_bf16x8). A lane takes a whole 16-block, so no
// shuffle, and the scale's arithmetic is paid once per 16 values: abs_max over all 16. On the
// H200 (notes v62, ncu, logical rows) 41-56% faster than a lane per 8 values (qwen3-30b W4A4
// T = 8192 130 -> 76 us, kimi-k2 T = 16384 701 -> 305 us). The padding stays as GEMM 1 wrote it.
__global__ void __launch_bounds__(kThreads) bf16_to_nvfp4_values_kernel(uint16_t* h, int64_t K, Walk wk, float gs) {
  const int64_t Kp = kperm_row(K);
  for_each_run<true, 16>(wk, K, [&](int64_t r, int64_t c) {
    if (c >= K / 16) return;
    uint16_t* blk = h + r * Kp + kperm_block_at(c);
    float x[16];
    load_kperm_block(blk, x);
    const uint8_t sc = nvfp4_scale_code(abs_max<16>(x), gs);
    const float inv = nvfp4_inv_scale(sc, gs), sv = e4m3_to_f32(sc);
    uint32_t v[2][4];
    nvfp4_requant_values_bf16x8(x, inv, sv, v[0]);
    nvfp4_requant_values_bf16x8(x + 8, inv, sv, v[1]);
#pragma unroll
    for (int m = 0; m < 8; ++m) *reinterpret_cast<uint32_t*>(blk + 8 * m) = v[m / 4][m % 4];
  });
}

// CTAs for `rows` rows (an upper bound) of K elements at kStep elements a lane step, and the
// shared memory of the expert scan.
template <int kStep = 8>
dim3 grid_for(int64_t rows, int64_t K) {
  const int64_t items = rows * runs_per_row<kStep>(K);
  return dim3(unsigned(std::min<int64_t>((items + kWarps - 1) / kWarps, kMaxCtas)));
}
size_t scan_smem(int64_t num_experts) { return size_t(num_experts + 1) * sizeof(int32_t); }

}  // namespace

void stage_nvfp4_to_bf16(const uint8_t* fp4, const uint8_t* scale, int64_t K, const ExpertRows& rows,
                         int64_t num_experts, int64_t dense_rows, uint16_t* out, cudaStream_t stream,
                         KOrder in, KOrder out_order) {
  const Walk wk{rows.begin, rows.count, int(num_experts), dense_rows};
  const bool live = dense_rows <= 0;
  if (live && rows.rows_bound <= 0) return;
  const int64_t n = live ? rows.rows_bound : dense_rows;
  const size_t smem = live ? scan_smem(num_experts) : 0;
  if (in == KOrder::logical && out_order == KOrder::logical) {
    if (live) nvfp4_to_bf16_kernel<true><<<grid_for(n, K), kThreads, smem, stream>>>(fp4, scale, K, wk, out);
    else nvfp4_to_bf16_kernel<false><<<grid_for(n, K), kThreads, smem, stream>>>(fp4, scale, K, wk, out);
  } else {
    if (out_order != KOrder::kperm)
      detail::fail_arg("stage_nvfp4_to_bf16: out_order: got logical from k-permuted codes, need kperm");
    const bool in_kperm = in == KOrder::kperm;
    const int64_t Kp = kperm_row(K);
    if (live)
      nvfp4_to_bf16_kperm_kernel<true><<<grid_for<16>(n, Kp), kThreads, smem, stream>>>(fp4, scale, K, in_kperm, wk, out);
    else
      nvfp4_to_bf16_kperm_kernel<false><<<grid_for<16>(n, Kp), kThreads, smem, stream>>>(fp4, scale, K, in_kperm, wk, out);
  }
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void stage_bf16_to_nvfp4(const uint16_t* h, int64_t K, const ExpertRows& rows, int64_t num_experts, float gs,
                         uint8_t* fp4, uint8_t* scale, cudaStream_t stream) {
  if (rows.rows_bound <= 0) return;
  const Walk wk{rows.begin, rows.count, int(num_experts), 0};
  bf16_to_nvfp4_kernel<<<grid_for<16>(rows.rows_bound, kperm_row(K)), kThreads, scan_smem(num_experts), stream>>>(
      h, K, wk, gs, fp4, scale);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void stage_bf16_to_nvfp4_values(uint16_t* h, int64_t K, const ExpertRows& rows, int64_t num_experts, float gs,
                                cudaStream_t stream) {
  if (rows.rows_bound <= 0) return;
  const Walk wk{rows.begin, rows.count, int(num_experts), 0};
  bf16_to_nvfp4_values_kernel<<<grid_for<16>(rows.rows_bound, K), kThreads, scan_smem(num_experts), stream>>>(
      h, K, wk, gs);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace fp4moe::cuda
