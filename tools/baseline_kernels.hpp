// The bf16 baseline's own kernels (tools/baseline.cu): deliberately simple, one thread per
// element or per row, so that the baseline's time is cuBLAS's grouped GEMMs plus a few
// memory-bound passes, as a user's "dequantize once, run bf16" MoE would be.
// Only CUDA builds include this header; every launcher returns the launch's error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fp4moe::cli::kernels {

// p[i] = bf16 of a uniform draw in [-1, 1) from (seed, i): non-zero data for the GEMM
// ceiling (zeros would let the tensor cores idle on some parts and overstate the rate).
cudaError_t fill_random_bf16(uint16_t* p, size_t n, uint64_t seed, cudaStream_t stream);

// dst[i] = src[i] for n16 16-byte words, 16-byte loads and stores, grid-stride over every
// SM: the copy ceiling's second measurement (next to cudaMemcpyAsync; the faster counts).
cudaError_t copy16(const void* src, void* dst, size_t n16, int sms, cudaStream_t stream);
// The same with eight 16-byte loads in flight per thread and cache-streaming (evict-first)
// loads and stores: the third measurement (notes 2026-11-29: copy16 reached 3.90-3.94 TB/s,
// issue 4 quotes 4.27 for this GPU; the fastest way counts).
cudaError_t copy16_streaming(const void* src, void* dst, size_t n16, int sms, cudaStream_t stream);

// One expert's FP4 matrix to bf16: data (rows, K/2) two e2m1 per byte, low nibble first;
// scale (rows, K/block) linear e4m3 (NVFP4, times dq_scale) or e8m0 (MXFP4);
// out (rows, K) bf16, each value rounded once from its exact fp32 dequantization.
cudaError_t dequant_fp4_bf16(const uint8_t* data, const uint8_t* scale, float dq_scale, bool mxfp4,
                             int64_t rows, int64_t K, uint16_t* out, cudaStream_t stream);

// Counting sort of the T*k slots by expert on one block (E <= 1024):
// row_of_slot (T*k) i32: the slot's row in the permuted activations (-1 for id -1);
// expert_of_row (T*k) i32: the expert of each permuted row.
// Rows of one expert are contiguous and in expert order, as the host's group sizes say;
// the order inside an expert is whatever the atomics give (the combine sums in slot order).
cudaError_t sort_slots(const int32_t* ids, int64_t slots, int64_t E, int32_t* row_of_slot, int32_t* expert_of_row,
                       cudaStream_t stream);

// xp[row_of_slot[s]] = x[s / k]: x (T, H) bf16 -> xp (rows, H) bf16.
cudaError_t gather_rows(const uint16_t* x, const int32_t* row_of_slot, int64_t slots, int64_t k, int64_t H,
                        uint16_t* xp, cudaStream_t stream);

// h (rows, I) bf16 = act(gate, up) of gu (rows, 2I) bf16, gate/up concatenated ([0,I) gate)
// or interleaved (2i gate, 2i+1 up); b13 (E, 2I) bf16 or null is added first, by the
// row's expert. silu(g) * u, or gpt-oss's clamped swiglu with `limit` and `alpha`.
cudaError_t gated_act(const uint16_t* gu, const int32_t* expert_of_row, const uint16_t* b13, int64_t rows,
                      int64_t I, bool interleaved, bool swiglu_oai, float limit, float alpha, uint16_t* h,
                      cudaStream_t stream);

// out (T, H) bf16 = sum over j = 0..k-1 of w[t, j] * (y[row_of_slot[t*k+j]] + b2[ids[t*k+j]]),
// fp32, in slot order; y (rows, H) bf16, b2 (E, H) bf16 or null.
cudaError_t combine(const uint16_t* y, const int32_t* row_of_slot, const int32_t* ids, const float* w,
                    const uint16_t* b2, int64_t T, int64_t k, int64_t H, uint16_t* out, cudaStream_t stream);

}  // namespace fp4moe::cli::kernels
