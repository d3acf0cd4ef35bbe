// The simple grouped GEMMs: one thread per (row, output), a plain K loop that decodes
// every weight with format.h through the layout's index functions. Slow and obviously
// right; kept as the second oracle for gemm_sm80_kernel.cuh and as the way in for newcomers.
//
// Rows: thread slot p in [0, rows_bound) is the p-th row of all experts taken in expert
// order; it finds its expert by walking count[] (E_local <= a few hundred). No host sync.
#include "cuda/common/check.hpp"
#include "cuda/gemm_internal.hpp"

namespace fp4moe::cuda {
namespace {

constexpr int kThreads = 128;

// Row r of slot p, and its expert; false when p is past the rows of all experts.
__device__ bool find_row(const ExpertRows& rows, int64_t num_experts, int64_t p, int& expert, int64_t& r) {
  int64_t seen = 0;
  for (int e = 0; e < num_experts; ++e) {
    const int64_t c = max(rows.count[e], 0);
    if (p < seen + c) {
      expert = e;
      r = rows.begin[e] + (p - seen);
      return true;
    }
    seen += c;
  }
  return false;
}

// Activation element k of A row `row`: bf16, or NVFP4 without its dq_scale. kperm: A is
// k-permuted (GEMM 2's h: rows of kperm_row(K), gemm_internal.hpp), else logical (GEMM 1's x).
__device__ float a_elem(const uint16_t* a_bf16, const uint8_t* a_fp4, const uint8_t* a_scale, int64_t row,
                        int K, int k, bool kperm) {
  const int64_t row_len = kperm ? kperm_row(K) : K, at = kperm ? kperm_index(k) : k;
  if (a_bf16) return bf16_to_f32(a_bf16[row * row_len + at]);
  const uint8_t code = unpack_e2m1(a_fp4[row * (row_len / 2) + at / 2], int(at & 1));
  return e2m1_to_f32(code) * e4m3_to_f32(a_scale[row * (K / 16) + k / 16]);
}

// sum_k a_k * W[e][n, k] * 2^-F (exact products, fp32 sum in k order).
__device__ float dot_row(const WeightMatrix& w, int e, int64_t n, const uint16_t* a_bf16, const uint8_t* a_fp4,
                         const uint8_t* a_scale, int64_t a_row, bool kperm) {
  float acc = 0.0f;
  for (int k = 0; k < w.K; ++k) {
    const NibbleAt at = frag_nibble(e, n, k, w.N, w.Kp);
    const uint8_t code = uint8_t(frag_stored_code((frag_word_load(w.q[at.word]) >> at.shift) & 15u));
    const float wv = e2m1_to_f32(code) * folded_scale(w.scale[frag_scale(e, n, k, w.N, w.Kp, w.block)], w.block);
    acc = fmaf(wv, a_elem(a_bf16, a_fp4, a_scale, a_row, w.K, k, kperm), acc);
  }
  return acc;
}

// One thread per (row slot, block of 16 i): h for 16 consecutive i, then (W4A4) their
// NVFP4 block. grid (ceil(rows_bound * I/16 / kThreads)), grid-stride.
__global__ void naive_gemm1_kernel(WeightMatrix w, LayerDesc desc, Gemm1Args args) {
  const int I = w.N / 2;
  const int64_t Ir = kperm_row(I);  // h is k-permuted (gemm_internal.hpp kperm_index)
  const int64_t blocks = I / 16;
  const int64_t total = args.rows.rows_bound * blocks;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int e;
    int64_t r;
    if (!find_row(args.rows, w.num_experts, idx / blocks, e, r)) continue;
    const int i0 = int(idx % blocks) * 16;
    const int64_t a_row = args.a_gather ? args.a_gather[r] : r;
    const float mult = w.epi[e] * args.a_dq;
    float h[16];
    for (int j = 0; j < 16; ++j) {
      const int i = i0 + j;
      float g = dot_row(w, e, w13_device_row(i, false), args.a_bf16, args.a_fp4, args.a_scale, a_row, false) * mult;
      float u = dot_row(w, e, w13_device_row(i, true), args.a_bf16, args.a_fp4, args.a_scale, a_row, false) * mult;
      if (w.bias) {
        g += w.bias[int64_t(e) * w.N + i];
        u += w.bias[int64_t(e) * w.N + I + i];
      }
      h[j] = round_bf16(gemm1_activation(g, u, desc.activation, desc.swiglu_alpha, desc.swiglu_limit));
      if (args.h_bf16) args.h_bf16[r * Ir + kperm_index(i)] = bf16_from_f32(h[j]);
    }
    const bool last = i0 + 16 == I;  // the row's zero padding, I .. Ir
    if (last && args.h_bf16)
      for (int i = I; i < Ir; ++i) args.h_bf16[r * Ir + kperm_index(i)] = 0;
    if (args.h_fp4) {
      float amax = 0.0f;
      for (int j = 0; j < 16; ++j) amax = fmaxf(amax, fabsf(h[j]));
      const uint8_t s = nvfp4_scale_code(amax, args.h_gs);
      const float inv = nvfp4_inv_scale(s, args.h_gs);
      for (int j = 0; j < 16; j += 2)
        args.h_fp4[r * (Ir / 2) + kperm_index(i0 + j) / 2] =
            pack_e2m1(e2m1_from_f32(h[j] * inv), e2m1_from_f32(h[j + 1] * inv));
      args.h_scale[r * (I / 16) + i0 / 16] = s;
      if (last)
        for (int i = I; i < Ir; i += 2) args.h_fp4[r * (Ir / 2) + kperm_index(i) / 2] = 0;
    }
  }
}

// One thread per (row slot, n): y = sum * w_dq * a_dq (+ bias).
__global__ void naive_gemm2_kernel(WeightMatrix w, Gemm2Args args) {
  const int64_t total = args.rows.rows_bound * w.N;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int e;
    int64_t r;
    if (!find_row(args.rows, w.num_experts, idx / w.N, e, r)) continue;
    const int n = int(idx % w.N);
    float y = dot_row(w, e, n, args.a_bf16, args.a_fp4, args.a_scale, r, true) * (w.epi[e] * args.a_dq);
    if (w.bias) y += w.bias[int64_t(e) * w.N + n];
    args.y[r * w.N + n] = y;
  }
}

// activation_mid_sweep: every fp32 bit pattern g once, grid-stride; u from g's bits.
__global__ void activation_mid_sweep_kernel(Activation act, float alpha, float limit,
                                            unsigned long long* counts) {
  unsigned long long taken = 0, differ = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (uint64_t(1) << 32); i += stride) {
    const float g = bits_f32(uint32_t(i));
    const uint32_t mix = uint32_t(i) * 2654435761u;
    const float u = (i & 1) ? bits_f32(mix) : bits_f32((mix & 0x807FFFFFu) | 0x3F800000u);  // any, or +-[1, 2)
    float h;
    if (!gemm1_activation_mid(g, u, act, alpha, limit, h)) continue;
    ++taken;
    const float want = gemm1_activation(g, u, act, alpha, limit);
    if (f32_bits(h) != f32_bits(want) && !(h != h && want != want)) ++differ;
  }
  for (int o = 16; o > 0; o /= 2) {
    taken += __shfl_xor_sync(0xFFFFFFFFu, taken, o);
    differ += __shfl_xor_sync(0xFFFFFFFFu, differ, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&counts[0], taken);
    atomicAdd(&counts[1], differ);
  }
}

// bf16_rn_sweep: every fp32 bit pattern as lo once, grid-stride; hi from lo's bits (any
// pattern), so that NaN and finite values meet in one conversion both ways round.
__global__ void bf16_rn_sweep_kernel(unsigned long long* differ_out) {
  unsigned long long differ = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (uint64_t(1) << 32); i += stride) {
    const uint32_t lo = uint32_t(i), hi = uint32_t(i) * 2654435761u ^ 0x5A5A0000u;
    const uint32_t d = bf16x2_from_f32(bits_f32(lo), bits_f32(hi));
    const uint32_t want = uint32_t(bf16_from_f32(bits_f32(lo))) | uint32_t(bf16_from_f32(bits_f32(hi))) << 16;
    differ += d != want;
  }
  for (int o = 16; o > 0; o /= 2) differ += __shfl_xor_sync(0xFFFFFFFFu, differ, o);
  if (threadIdx.x % 32 == 0) atomicAdd(differ_out, differ);
}

// fp4_encode_checksums: every fp32 bit pattern b once, grid-stride; per encoder the sum over b
// of (code + 1) * fp4_encode_mix(b), mod 2^64.
__global__ void fp4_encode_checksums_kernel(unsigned long long* sums) {
  unsigned long long s2 = 0, s3 = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (uint64_t(1) << 32); i += stride) {
    const float x = bits_f32(uint32_t(i));
    const uint64_t mix = fp4_encode_mix(uint32_t(i));
    s2 += (uint64_t(e2m1_from_f32(x)) + 1) * mix;
    s3 += (uint64_t(e4m3_from_f32(x)) + 1) * mix;
  }
  for (int o = 16; o > 0; o /= 2) {
    s2 += __shfl_xor_sync(0xFFFFFFFFu, s2, o);
    s3 += __shfl_xor_sync(0xFFFFFFFFu, s3, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], s2);
    atomicAdd(&sums[1], s3);
  }
}

unsigned grid_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return unsigned(blocks < (1 << 20) ? blocks : (1 << 20));
}

}  // namespace

void naive_gemm1(const CudaWeights& w, const Gemm1Args& a, cudaStream_t stream) {
  const int64_t total = a.rows.rows_bound * (w.w13.N / 2 / 16);
  if (total == 0) return;
  naive_gemm1_kernel<<<grid_for(total), kThreads, 0, stream>>>(w.w13, w.desc, a);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void naive_gemm2(const CudaWeights& w, const Gemm2Args& a, cudaStream_t stream) {
  const int64_t total = a.rows.rows_bound * w.w2.N;
  if (total == 0) return;
  naive_gemm2_kernel<<<grid_for(total), kThreads, 0, stream>>>(w.w2, a);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

namespace {

// The sweeps' host side: n device counters zeroed, launch(counters) on the default stream,
// the counters copied into out. Synchronous; the counters are freed on every path.
template <class Launch>
void sweep_counts(int n, unsigned long long* out, Launch launch) {
  unsigned long long* d = nullptr;
  FP4MOE_CUDA_CHECK(cudaMalloc(&d, n * sizeof *d));
  const cudaError_t run = [&] {
    cudaError_t err = cudaMemset(d, 0, n * sizeof *d);
    if (err != cudaSuccess) return err;
    launch(d);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    return cudaMemcpy(out, d, n * sizeof *d, cudaMemcpyDeviceToHost);
  }();
  cudaFree(d);
  FP4MOE_CUDA_CHECK(run);
}

}  // namespace

void activation_mid_sweep(Activation act, float alpha, float limit, uint64_t counts[2]) {
  unsigned long long h[2] = {};
  sweep_counts(2, h, [&](unsigned long long* d) { activation_mid_sweep_kernel<<<4096, 256>>>(act, alpha, limit, d); });
  counts[0] = h[0];
  counts[1] = h[1];
}

void fp4_encode_checksums(uint64_t sums[2]) {
  unsigned long long h[2] = {};
  sweep_counts(2, h, [](unsigned long long* d) { fp4_encode_checksums_kernel<<<4096, 256>>>(d); });
  sums[0] = h[0];
  sums[1] = h[1];
}

uint64_t bf16_rn_sweep() {
  unsigned long long differ = 0;
  sweep_counts(1, &differ, [](unsigned long long* d) { bf16_rn_sweep_kernel<<<4096, 256>>>(d); });
  return differ;
}

}  // namespace fp4moe::cuda
