// EP kernels (ep_kernels.hpp). One block per slab row or per token; no float atomics,
// integer atomics only set status bits and maxima, so every result is deterministic.
#include "ep/ep_kernels.hpp"

#include <algorithm>

#include "backend.hpp"
#include "cuda/common/check.hpp"
#include "fp4moe/format.h"

namespace fp4moe::ep {
namespace {

constexpr int kThreads = 256;

// x dtype codes: 0 f32, 1 bf16, 2 f16 (also used for out)
int dtype_code(DType t, const char* what) {
  switch (t) {
    case DType::f32: return 0;
    case DType::bf16: return 1;
    case DType::f16: return 2;
    default: detail::fail_arg(std::string(what) + ": dtype: got " + dtype_name(t) + ", need f32|bf16|f16");
  }
}

__device__ __forceinline__ float load_as_f32(const void* p, int64_t i, int dt) {
  if (dt == 0) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return dt == 1 ? bf16_to_f32(h) : f16_to_f32(h);
}

__device__ __forceinline__ void store_from_f32(void* p, int64_t i, int dt, float v) {
  if (dt == 0)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = dt == 1 ? bf16_from_f32(v) : f16_from_f32(v);
}

// Rows rank d receives from this rank before clamping: positions [begin[f], begin[f] + total).
__device__ __forceinline__ int64_t rows_for(const Placement& pl, const int32_t* begin, const int32_t* count,
                                            int64_t d) {
  const int64_t f = pl.first(d), n = pl.count(d);
  if (n == 0) return 0;
  return int64_t(begin[f + n - 1]) + count[f + n - 1] - begin[f];
}

// grid (W*C); one block copies one slab row.
__global__ void __launch_bounds__(kThreads) pack_kernel(PackArgs a, int x_dt) {
  const int64_t r = blockIdx.x, d = r / a.C, i = r % a.C;
  if (i >= rows_for(a.pl, a.begin, a.count, d)) return;
  const int64_t tok = a.row_token[a.begin[a.pl.first(d)] + i];
  uint16_t* dst = a.send + r * a.H;
  const char* src = static_cast<const char*>(a.x) + size_t(tok * a.x_stride) * (x_dt == 0 ? 4 : 2);
  for (int64_t c = threadIdx.x; c < a.H; c += kThreads) {
    // bf16 as the layer takes it (SPEC §4): bf16 input is copied, others rounded once
    dst[c] = x_dt == 1 ? reinterpret_cast<const uint16_t*>(src)[c] : bf16_from_f32(load_as_f32(src, c, x_dt));
  }
}

// one block; thread per (d, e) of (W, n_max)
__global__ void __launch_bounds__(kThreads) send_counts_kernel(PackArgs a) {
  for (int64_t idx = threadIdx.x; idx < a.pl.W * a.n_max; idx += kThreads) {
    const int64_t d = idx / a.n_max, e = idx % a.n_max;
    int32_t sent = 0;
    if (e < a.pl.count(d)) {
      const int64_t f = a.pl.first(d);
      const int64_t before = int64_t(a.begin[f + e]) - a.begin[f];
      sent = int32_t(max(int64_t(0), min(int64_t(a.count[f + e]), a.C - before)));
    }
    a.send_counts[idx] = sent;
    if (e == 0) {
      const int64_t total = rows_for(a.pl, a.begin, a.count, d);
      if (total > a.C) {
        atomicOr(a.status, kEpSendOverflow);
        atomicMax(a.status + 1, uint32_t(total));
      }
    }
  }
}

// one block: per local expert its total (-> expert_num_tokens) and the offsets of each
// source's rows inside it; per source slab the first row of each expert.
__global__ void __launch_bounds__(kThreads) land_tables_kernel(LandArgs a) {
  for (int64_t e = threadIdx.x; e < a.n_local; e += kThreads) {
    int64_t total = 0;
    for (int s = 0; s < a.W; ++s) {
      a.src_offset[s * a.n_max + e] = int32_t(total);
      total += max(a.recv_counts[s * a.n_max + e], 0);
    }
    if (total > a.M) {
      atomicOr(a.status, kEpExpertOverflow);
      atomicMax(a.status + 2, uint32_t(total));
    }
    a.expert_num_tokens[e] = int32_t(min(total, a.M));
  }
  for (int64_t s = threadIdx.x; s < a.W; s += kThreads) {
    int32_t* prefix = a.slab_prefix + s * (a.n_max + 1);
    int32_t run = 0;
    prefix[0] = 0;
    for (int64_t e = 0; e < a.n_local; ++e) prefix[e + 1] = run += max(a.recv_counts[s * a.n_max + e], 0);
  }
}

// thread per slab row (W*C): its expert by binary search in the slab's prefix
__global__ void __launch_bounds__(kThreads) row_dest_kernel(LandArgs a) {
  const int64_t r = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (r >= a.W * a.C) return;
  const int64_t s = r / a.C, i = r % a.C;
  const int32_t* prefix = a.slab_prefix + s * (a.n_max + 1);
  int32_t dest = -1;
  if (i < prefix[a.n_local]) {
    // the first e with prefix[e + 1] > i (experts without rows have prefix[e + 1] == prefix[e])
    int64_t lo = 0, hi = a.n_local - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (prefix[mid + 1] > i)
        hi = mid;
      else
        lo = mid + 1;
    }
    const int64_t pos = a.src_offset[s * a.n_max + lo] + (i - prefix[lo]);
    if (pos < a.M) dest = int32_t(lo * a.M + pos);
  }
  a.row_dest[r] = dest;
}

template <class Word>
__global__ void __launch_bounds__(kThreads) scatter_kernel(const Word* src, const int32_t* row_dest, int64_t words,
                                                           Word* dst) {
  const int64_t r = blockIdx.x;
  const int32_t d = row_dest[r];
  if (d < 0) return;
  for (int64_t c = threadIdx.x; c < words; c += kThreads) dst[int64_t(d) * words + c] = src[r * words + c];
}

__global__ void __launch_bounds__(kThreads) gather_back_kernel(const float* y, const int32_t* row_dest, int64_t H,
                                                               int back_dt, void* back) {
  const int64_t r = blockIdx.x;
  const int32_t d = row_dest[r];
  for (int64_t c = threadIdx.x; c < H; c += kThreads)
    store_from_f32(back, r * H + c, back_dt, d < 0 ? 0.0f : y[int64_t(d) * H + c]);
}

// grid (T, ceil(H / kThreads)); thread per column. The loop is cuda::combine's exactly.
__global__ void __launch_bounds__(kThreads) combine_kernel(EpCombineArgs a, int back_dt, int out_dt) {
  const int64_t t = blockIdx.x;
  const int64_t c = int64_t(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= a.H) return;
  float acc = 0.0f;
  for (int64_t j = 0; j < a.k; ++j) {
    const int64_t s = t * a.k + j;
    const int32_t pos = a.slot_row[s];
    if (pos < 0) continue;  // no expert (or an id out of range, flagged by the permute)
    const int d = a.pl.owner(a.topk_ids[s]);
    const int64_t i = int64_t(pos) - a.begin[a.pl.first(d)];
    if (i >= a.C) continue;  // did not fit the slab: flagged as kEpSendOverflow
    const float y = load_as_f32(a.back, (int64_t(d) * a.C + i) * a.H + c, back_dt);
    acc = __fadd_rn(acc, __fmul_rn(a.topk_weights[s], y));
  }
  const size_t esize = out_dt == 0 ? 4 : 2;
  void* o = static_cast<char*>(a.out) + size_t(t * a.out_stride) * esize;
  if (a.accumulate) acc = __fadd_rn(load_as_f32(o, c, out_dt), acc);
  store_from_f32(o, c, out_dt, acc);
}

__global__ void __launch_bounds__(kThreads) finish_kernel(const float* sum, int64_t T, int64_t H, void* out,
                                                          int out_dt, int64_t out_stride, bool accumulate) {
  const int64_t esize = out_dt == 0 ? 4 : 2;
  for (int64_t idx = int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < T * H; idx += int64_t(gridDim.x) * kThreads) {
    const int64_t t = idx / H, c = idx % H;
    void* o = static_cast<char*>(out) + size_t(t * out_stride) * esize;
    float v = sum[idx];
    if (accumulate) v = __fadd_rn(load_as_f32(o, c, out_dt), v);
    store_from_f32(o, c, out_dt, v);
  }
}

}  // namespace

void pack(const PackArgs& a, cudaStream_t stream) {
  const int x_dt = dtype_code(a.x_dtype, "hidden_states");
  send_counts_kernel<<<1, kThreads, 0, stream>>>(a);
  FP4MOE_CUDA_CHECK_LAUNCH();
  pack_kernel<<<unsigned(a.pl.W * a.C), kThreads, 0, stream>>>(a, x_dt);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void land_map(const LandArgs& a, cudaStream_t stream) {
  land_tables_kernel<<<1, kThreads, 0, stream>>>(a);
  FP4MOE_CUDA_CHECK_LAUNCH();
  const int64_t rows = a.W * a.C;
  row_dest_kernel<<<unsigned((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(a);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void scatter_rows(const void* src, const int32_t* row_dest, int64_t rows, int64_t row_bytes, void* dst,
                  cudaStream_t stream) {
  if (rows <= 0 || row_bytes <= 0) return;
  if (row_bytes % 4 == 0)
    scatter_kernel<uint32_t><<<unsigned(rows), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), row_dest, row_bytes / 4, static_cast<uint32_t*>(dst));
  else
    scatter_kernel<uint8_t><<<unsigned(rows), kThreads, 0, stream>>>(static_cast<const uint8_t*>(src), row_dest,
                                                                      row_bytes, static_cast<uint8_t*>(dst));
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void gather_back(const float* y, const int32_t* row_dest, int64_t rows, int64_t H, bool back_bf16, void* back,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  gather_back_kernel<<<unsigned(rows), kThreads, 0, stream>>>(y, row_dest, H, back_bf16 ? 1 : 0, back);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void combine(const EpCombineArgs& a, cudaStream_t stream) {
  if (a.T <= 0) return;
  const int out_dt = dtype_code(a.out_dtype, "out");
  const dim3 grid(unsigned(a.T), unsigned((a.H + kThreads - 1) / kThreads));
  combine_kernel<<<grid, kThreads, 0, stream>>>(a, a.back_bf16 ? 1 : 0, out_dt);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void finish_sum(const float* sum, int64_t T, int64_t H, void* out, DType out_dtype, int64_t out_stride,
                bool accumulate, cudaStream_t stream) {
  if (T <= 0) return;
  const int out_dt = dtype_code(out_dtype, "out");
  const int64_t blocks = std::min<int64_t>((T * H + kThreads - 1) / kThreads, 4096);
  finish_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(sum, T, H, out, out_dt, out_stride, accumulate);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace fp4moe::ep
