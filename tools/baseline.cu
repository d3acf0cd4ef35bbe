#include <algorithm>
#include "baseline_kernels.hpp"

#include "fp4moe/format.h"

namespace fp4moe::cli::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 1 ? 1 : (b > 1 << 20 ? 1 << 20 : b));  // grid-stride loops cover the rest
}

__device__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint64_t r = mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
    p[i] = bf16_from_f32(float(r >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// One thread per packed byte: two outputs.
__global__ void dequant_kernel(const uint8_t* data, const uint8_t* scale, float dq, bool mx, int64_t rows,
                               int64_t K, uint16_t* out) {
  const int64_t bytes = rows * (K / 2);
  const int block = mx ? kMxfp4Block : kNvfp4Block;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < bytes; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (K / 2), c = 2 * (i % (K / 2));  // element column of the low nibble
    const uint8_t sc = scale[r * (K / block) + c / block];
    const float s = mx ? e8m0_to_f32(sc) : e4m3_to_f32(sc) * dq;
    out[r * K + c] = bf16_from_f32(e2m1_to_f32(unpack_e2m1(data[i], 0)) * s);
    out[r * K + c + 1] = bf16_from_f32(e2m1_to_f32(unpack_e2m1(data[i], 1)) * s);
  }
}

__global__ void sort_kernel(const int32_t* ids, int64_t slots, int64_t E, int32_t* row_of_slot,
                            int32_t* expert_of_row) {
  __shared__ int count[1024];
  __shared__ int cursor[1024];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x)
    if (ids[s] >= 0 && ids[s] < E) atomicAdd(&count[ids[s]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {  // E <= 1024: a serial scan is a few µs at most
    int run = 0;
    for (int64_t e = 0; e < E; ++e) {
      cursor[e] = run;
      run += count[e];
    }
  }
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x) {
    const int32_t e = ids[s];
    if (e < 0 || e >= E) {
      row_of_slot[s] = -1;
      continue;
    }
    const int row = atomicAdd(&cursor[e], 1);
    row_of_slot[s] = row;
    expert_of_row[row] = e;
  }
}

// One block per slot; 16-byte copies (H * 2 is a multiple of 16 for every preset, checked by the caller).
__global__ void gather_kernel(const uint16_t* x, const int32_t* row_of_slot, int64_t k, int64_t H, uint16_t* xp) {
  const int64_t s = blockIdx.x;
  const int32_t row = row_of_slot[s];
  if (row < 0) return;
  const uint4* src = reinterpret_cast<const uint4*>(x + (s / k) * H);
  uint4* dst = reinterpret_cast<uint4*>(xp + int64_t(row) * H);
  for (int64_t i = threadIdx.x; i < H / 8; i += blockDim.x) dst[i] = src[i];
}

__global__ void act_kernel(const uint16_t* gu, const int32_t* expert_of_row, const uint16_t* b13, int64_t rows,
                           int64_t I, bool interleaved, bool swiglu, float limit, float alpha, uint16_t* h) {
  const int64_t n = rows * I;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / I, c = i % I;
    const int64_t gc = interleaved ? 2 * c : c, uc = interleaved ? 2 * c + 1 : I + c;
    float g = bf16_to_f32(gu[r * 2 * I + gc]), u = bf16_to_f32(gu[r * 2 * I + uc]);
    if (b13) {
      const int64_t e = expert_of_row[r];
      g += bf16_to_f32(b13[e * 2 * I + gc]);
      u += bf16_to_f32(b13[e * 2 * I + uc]);
    }
    float v;
    if (swiglu) {
      g = fminf(g, limit);
      u = fminf(fmaxf(u, -limit), limit);
      v = (u + 1.0f) * g * (1.0f / (1.0f + __expf(-alpha * g)));
    } else {
      v = g / (1.0f + __expf(-g)) * u;
    }
    h[i] = bf16_from_f32(v);
  }
}

__global__ void combine_kernel(const uint16_t* y, const int32_t* row_of_slot, const int32_t* ids, const float* w,
                               const uint16_t* b2, int64_t k, int64_t H, uint16_t* out) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t row = row_of_slot[t * k + j];
      if (row < 0) continue;
      float v = bf16_to_f32(y[int64_t(row) * H + c]);
      if (b2) v += bf16_to_f32(b2[int64_t(ids[t * k + j]) * H + c]);
      acc += w[t * k + j] * v;
    }
    out[t * H + c] = bf16_from_f32(acc);
  }
}

__global__ void copy16_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n16) {
  // four independent 16-byte loads in flight per thread before the stores
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a, dst[i + stride] = b, dst[i + 2 * stride] = c, dst[i + 3 * stride] = d;
  }
  for (; i < n16; i += stride) dst[i] = src[i];
}

__global__ void copy16_streaming_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n16) {
  // eight independent 16-byte loads in flight per thread, evict-first in both directions
  constexpr int kU = 8;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kU - 1) * stride < n16; i += kU * stride) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kU; ++u) __stcs(dst + i + u * stride, v[u]);
  }
  for (; i < n16; i += stride) __stcs(dst + i, __ldcs(src + i));
}

}  // namespace

cudaError_t copy16_streaming(const void* src, void* dst, size_t n16, int sms, cudaStream_t stream) {
  copy16_streaming_kernel<<<unsigned(std::max(1, sms) * 4), 512, 0, stream>>>(static_cast<const uint4*>(src),
                                                                              static_cast<uint4*>(dst), n16);
  return cudaGetLastError();
}

cudaError_t copy16(const void* src, void* dst, size_t n16, int sms, cudaStream_t stream) {
  copy16_kernel<<<unsigned(std::max(1, sms) * 4), 512, 0, stream>>>(static_cast<const uint4*>(src),
                                                                    static_cast<uint4*>(dst), n16);
  return cudaGetLastError();
}

cudaError_t fill_random_bf16(uint16_t* p, size_t n, uint64_t seed, cudaStream_t stream) {
  fill_random_kernel<<<blocks_for(int64_t(n)), kThreads, 0, stream>>>(p, n, seed);
  return cudaGetLastError();
}

cudaError_t dequant_fp4_bf16(const uint8_t* data, const uint8_t* scale, float dq_scale, bool mxfp4, int64_t rows,
                             int64_t K, uint16_t* out, cudaStream_t stream) {
  dequant_kernel<<<blocks_for(rows * K / 2), kThreads, 0, stream>>>(data, scale, dq_scale, mxfp4, rows, K, out);
  return cudaGetLastError();
}

cudaError_t sort_slots(const int32_t* ids, int64_t slots, int64_t E, int32_t* row_of_slot, int32_t* expert_of_row,
                       cudaStream_t stream) {
  if (E > 1024) return cudaErrorInvalidValue;
  sort_kernel<<<1, 1024, 0, stream>>>(ids, slots, E, row_of_slot, expert_of_row);
  return cudaGetLastError();
}

cudaError_t gather_rows(const uint16_t* x, const int32_t* row_of_slot, int64_t slots, int64_t k, int64_t H,
                        uint16_t* xp, cudaStream_t stream) {
  if (H % 8 != 0 || slots <= 0) return slots <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  gather_kernel<<<unsigned(slots), 128, 0, stream>>>(x, row_of_slot, k, H, xp);
  return cudaGetLastError();
}

cudaError_t gated_act(const uint16_t* gu, const int32_t* expert_of_row, const uint16_t* b13, int64_t rows, int64_t I,
                      bool interleaved, bool swiglu_oai, float limit, float alpha, uint16_t* h, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  act_kernel<<<blocks_for(rows * I), kThreads, 0, stream>>>(gu, expert_of_row, b13, rows, I, interleaved, swiglu_oai,
                                                           limit, alpha, h);
  return cudaGetLastError();
}

cudaError_t combine(const uint16_t* y, const int32_t* row_of_slot, const int32_t* ids, const float* w,
                    const uint16_t* b2, int64_t T, int64_t k, int64_t H, uint16_t* out, cudaStream_t stream) {
  if (T <= 0) return cudaSuccess;
  combine_kernel<<<unsigned(T), 256, 0, stream>>>(y, row_of_slot, ids, w, b2, k, H, out);
  return cudaGetLastError();
}

}  // namespace fp4moe::cli::kernels
