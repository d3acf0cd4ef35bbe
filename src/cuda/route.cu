// Routing on the GPU (SPEC §4): one warp per token.
//
// Ids are bit-identical to detail::route_reference (src/reference/routing.cpp): the
// same fp32 values are selected (logits for softmax, portable_sigmoidf + bias for
// sigmoid_grouped), with the reference's sequential "best remaining candidate" rule
// reproduced exactly (reg_best, warp_best), NaN included. The weights' sums run in the
// reference's order, so weights are bit-identical too.
//
// Two kernels. route_kernel_reg (E <= 512, k <= 32, n_group <= 32: every preset) holds a
// token's E scores in registers, NPL per lane, and takes each of the k passes with two
// warp reductions (redux.sync) on order-preserving keys. One warp per token runs its steps
// one after the other, so the kernel's time is the sum of their latencies: at T = 1 the
// shared-memory kernel below (each pass a scan of shared memory and five rounds of shuffles;
// the logits loaded one after another) took 9.7 / 19.0 us under ncu on qwen3-30b / kimi-k2
// against 1.6 for an empty kernel (notes v49). route_kernel (shared memory) takes the rest.
#include <climits>

#include "cuda/common/check.hpp"
#include "cuda/pipeline.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cuda {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kWarpsPerBlock = 4;

struct RouteKernelArgs {
  const float* logits;     // (T, E), strides ls0, ls1
  int64_t ls0, ls1;
  const float* bias;       // (E) stride bs, or nullptr
  int64_t bs;
  int32_t* ids;            // (T, k), strides is0, is1
  int64_t is0, is1;
  float* weights;          // (T, k), strides ws0, ws1
  int64_t ws0, ws1;
  int64_t T;
  int E, k;
  int method;              // 0 softmax, 1 sigmoid_grouped
  int renormalize;
  int n_group, topk_group;
  float scaling;
};

// Per-warp shared memory, in floats: score (E), aux (E), gscore (G), then bytes
// cand (E), gcand (G), and the k selected ids.
__host__ __device__ inline size_t route_warp_bytes(int E, int G, int k) {
  const size_t floats = size_t(2 * E + G) * 4;
  const size_t flags = (size_t(E + G) + 3) / 4 * 4;
  return floats + flags + size_t(k) * 4;
}

// Index of the best candidate (cand[e] != 0) of score[0, n), exactly as the
// reference's sequential scan "best = first; replace when score[e] > score[best]":
// when the first candidate is NaN it wins; otherwise NaNs never win and equal scores
// go to the lower index. -1 when there is no candidate. All lanes return the same.
__device__ int warp_best(const float* score, const unsigned char* cand, int n) {
  const int lane = threadIdx.x & 31;
  int first = INT_MAX, bi = -1;
  float bv = 0.0f;
  for (int e = lane; e < n; e += 32) {
    if (!cand[e]) continue;
    if (first == INT_MAX) first = e;  // e increases along the lane
    const float v = score[e];
    if (v != v) continue;
    if (bi < 0 || v > bv) {
      bv = v;
      bi = e;
    }
  }
  for (int d = 16; d > 0; d >>= 1) {
    first = min(first, __shfl_xor_sync(kFull, first, d));
    const float ov = __shfl_xor_sync(kFull, bv, d);
    const int oi = __shfl_xor_sync(kFull, bi, d);
    if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
      bv = ov;
      bi = oi;
    }
  }
  if (first == INT_MAX) return -1;
  const float fv = score[first];
  return fv != fv ? first : bi;
}

// k passes of warp_best; sel (k) in shared memory. Consumes cand.
__device__ void warp_top_k(const float* score, unsigned char* cand, int n, int k, int* sel) {
  const int lane = threadIdx.x & 31;
  for (int j = 0; j < k; ++j) {
    const int b = warp_best(score, cand, n);
    __syncwarp();
    if (lane == 0) {
      sel[j] = b;
      if (b >= 0) cand[b] = 0;
    }
    __syncwarp();
  }
}

// sigmoid_grouped's score of group g (experts [g per, (g + 1) per) of b = score): the sum of
// its two best b, or its one b when per = 1, by the reference's two sequential scans (a NaN
// first expert stays best; ties to the lower index). One lane per group. Each scan carries its
// best value in a register: reading score[best] in the loop made every step wait on the load
// the step before chose (deepseek-v3, per = 32: 64 dependent shared-memory loads a token).
__device__ __forceinline__ float group_score(const float* score, int g, int per) {
  const int lo = g * per, hi = lo + per;
  int b0 = lo;
  float v0 = score[lo];
#pragma unroll 8
  for (int e = lo + 1; e < hi; ++e) {
    const float x = score[e];
    if (x > v0) {
      v0 = x;
      b0 = e;
    }
  }
  if (per < 2) return v0;
  int b1 = -1;
  float v1 = 0.0f;
#pragma unroll 8
  for (int e = lo; e < hi; ++e) {
    const float x = score[e];
    if (e != b0 && (b1 < 0 || x > v1)) {
      v1 = x;
      b1 = e;
    }
  }
  return v0 + v1;
}

__global__ void __launch_bounds__(32 * kWarpsPerBlock) route_kernel(RouteKernelArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= a.T) return;  // whole warps; no block barrier below
  const int E = a.E, G = a.n_group, k = a.k;
  unsigned char* base = smem + size_t(warp) * route_warp_bytes(E, G, k);
  float* score = reinterpret_cast<float*>(base);  // (E) selection score
  float* aux = score + E;                          // (E) exp(l - max) | sigmoid
  float* gscore = aux + E;                         // (G)
  unsigned char* cand = reinterpret_cast<unsigned char*>(gscore + G);  // (E)
  unsigned char* gcand = cand + E;                                     // (G)
  int* sel = reinterpret_cast<int*>(base + route_warp_bytes(E, G, k) - size_t(k) * 4);  // (k)

  const float* row = a.logits + t * a.ls0;

  if (a.method == 0) {
    // softmax: select on the logits (exp is monotone), weights from portable_expf
    float mx_lane = 0.0f;
    bool have = false;
    for (int e = lane; e < E; e += 32) {
      const float l = row[e * a.ls1];
      score[e] = l;
      cand[e] = 1;
      if (l == l && (!have || l > mx_lane)) {
        mx_lane = l;
        have = true;
      }
    }
    // max over non-NaN logits; the reference's running max is NaN iff logit 0 is NaN
    for (int d = 16; d > 0; d >>= 1) {
      const float o = __shfl_xor_sync(kFull, mx_lane, d);
      const bool oh = __shfl_xor_sync(kFull, int(have), d);
      if (oh && (!have || o > mx_lane)) mx_lane = o;
      have = have || oh;
    }
    __syncwarp();
    const float l0 = score[0];
    const float mx = (l0 != l0) ? l0 : mx_lane;
    for (int e = lane; e < E; e += 32) aux[e] = portable_expf(score[e] - mx);
    __syncwarp();
    warp_top_k(score, cand, E, k, sel);
    if (lane == 0) {
      float sum = 0.0f;
      for (int e = 0; e < E; ++e) sum += aux[e];  // the reference's order
      float sel_sum = 0.0f;
      for (int j = 0; j < k; ++j) sel_sum += sel[j] < 0 ? 0.0f : aux[sel[j]] / sum;
      for (int j = 0; j < k; ++j) {
        float w = sel[j] < 0 ? 0.0f : aux[sel[j]] / sum;
        if (a.renormalize) w = w / sel_sum;
        a.weights[t * a.ws0 + j * a.ws1] = w;
        a.ids[t * a.is0 + j * a.is1] = sel[j];
      }
    }
    return;
  }

  // sigmoid_grouped: b = sigmoid(l) + bias selects, the unbiased sigmoid weighs
  for (int e = lane; e < E; e += 32) {
    const float s = portable_sigmoidf(row[e * a.ls1]);
    aux[e] = s;
    score[e] = a.bias ? s + a.bias[e * a.bs] : s;
  }
  __syncwarp();
  const int per = E / G;
  if (a.topk_group < G) {
    // group score = sum of the 2 best b of the group; one lane per group runs the
    // reference's sequential scans
    for (int g = lane; g < G; g += 32) {
      gscore[g] = group_score(score, g, per);
      gcand[g] = 1;
    }
    for (int e = lane; e < E; e += 32) cand[e] = 0;
    __syncwarp();
    // keep topk_group groups (sel is free until the expert pass)
    for (int j = 0; j < a.topk_group; ++j) {
      const int g = warp_best(gscore, gcand, G);
      __syncwarp();
      if (g >= 0) {
        for (int e = g * per + lane; e < (g + 1) * per; e += 32) cand[e] = 1;
        if (lane == 0) gcand[g] = 0;
      }
      __syncwarp();
    }
  } else {
    // every group is kept
    for (int e = lane; e < E; e += 32) cand[e] = 1;
    __syncwarp();
  }
  warp_top_k(score, cand, E, k, sel);
  if (lane == 0) {
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += sel[j] < 0 ? 0.0f : aux[sel[j]];
    for (int j = 0; j < k; ++j) {
      const float s = sel[j] < 0 ? 0.0f : aux[sel[j]];
      const float w = a.renormalize ? s / (sum + 1e-20f) : s;
      a.weights[t * a.ws0 + j * a.ws1] = w * a.scaling;
      a.ids[t * a.is0 + j * a.is1] = sel[j];
    }
  }
}

// ---- the register kernel (E <= 32 * NPL) ----

// Order-preserving key of a non-NaN score: a larger score has a larger key, -0 and +0 the
// same (the reference compares with >, which cannot tell them apart); every key is > 0, so 0
// stands for "no candidate".
__device__ __forceinline__ uint32_t score_key(float x) {
  const uint32_t u = x == 0.0f ? 0u : __float_as_uint(x);
  return (u >> 31) ? ~u : (u | 0x80000000u);
}
// The score of a key (of +0 for either zero).
__device__ __forceinline__ float key_score(uint32_t key) {
  return __uint_as_float((key >> 31) ? (key & 0x7FFFFFFFu) : ~key);
}

// The best remaining candidate of the warp's n <= 32 * NPL values, by warp_best's rule (the
// reference's sequential scan: the first candidate wins when it is NaN; otherwise NaNs never
// win and equal scores go to the lower index). Lane l holds index l + 32 i in v[i], and bit i
// of its `cand` marks a candidate; the winner's bit is cleared. -1 when no candidate is left.
// All lanes return the same.
template <int NPL>
__device__ __forceinline__ int reg_best(const float (&v)[NPL], uint32_t& cand, int lane) {
  uint32_t best_key = 0;
  int best_e = INT_MAX, first_e = INT_MAX;
  bool first_nan = false;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    if (((cand >> i) & 1u) == 0) continue;
    const float x = v[i];
    const int e = lane + 32 * i;  // increases with i: the lane's first candidate, and ties to the lower index
    if (first_e == INT_MAX) {
      first_e = e;
      first_nan = x != x;
    }
    const uint32_t key = x != x ? 0u : score_key(x);
    if (key > best_key) {
      best_key = key;
      best_e = e;
    }
  }
  const int first = __reduce_min_sync(kFull, first_e);
  if (first == INT_MAX) return -1;
  int b;
  if (__any_sync(kFull, first_e == first && first_nan)) {
    b = first;  // also when every candidate left is NaN
  } else {
    const uint32_t top = __reduce_max_sync(kFull, best_key);
    b = __reduce_min_sync(kFull, best_key == top ? best_e : INT_MAX);
  }
  if ((b & 31) == lane) cand &= ~(1u << (b >> 5));
  return b;
}

// One warp per token, as route_kernel, with the token's values in registers: v[i] holds
// expert lane + 32 i. Shared memory (the same per-warp layout) holds the values that one lane
// reads by index: softmax's exp terms (the sum in the reference's order, every lane the same
// chain of broadcast reads), sigmoid_grouped's b (each group's two best, one lane per group)
// and s (the selected experts' weights).
template <int NPL>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) route_kernel_reg(RouteKernelArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= a.T) return;  // whole warps; no block barrier below
  const int E = a.E, G = a.n_group, k = a.k;
  float* score = reinterpret_cast<float*>(smem + size_t(warp) * route_warp_bytes(E, G, k));  // (E)
  float* aux = score + E;                                                                     // (E)
  const float* row = a.logits + t * a.ls0;

  // Every load first (one latency, not NPL): the logits, and sigmoid_grouped's bias.
  float v[NPL], bias[NPL];
  uint32_t valid = 0;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int e = lane + 32 * i;
    v[i] = 0.0f;
    bias[i] = 0.0f;
    if (e < E) {
      v[i] = row[e * a.ls1];
      if (a.bias) bias[i] = a.bias[e * a.bs];
      valid |= 1u << i;
    }
  }

  int sel = -1;  // lane j < k: the j-th selected expert
  float w = 0.0f;
  if (a.method == 0) {
    // softmax: select on the logits (exp is monotone), weights from portable_expf. The
    // reference's running max is logit 0 when that is NaN, else the largest non-NaN logit
    // (either zero of a zero maximum gives the same differences).
    uint32_t mkey = 0;
#pragma unroll
    for (int i = 0; i < NPL; ++i)
      if (((valid >> i) & 1u) && v[i] == v[i]) mkey = max(mkey, score_key(v[i]));
    mkey = __reduce_max_sync(kFull, mkey);
    const float l0 = __shfl_sync(kFull, v[0], 0);
    const float mx = l0 != l0 ? l0 : key_score(mkey);
#pragma unroll
    for (int i = 0; i < NPL; ++i)
      if ((valid >> i) & 1u) aux[lane + 32 * i] = portable_expf(v[i] - mx);
    uint32_t cand = valid;
    for (int j = 0; j < k; ++j) {
      const int b = reg_best<NPL>(v, cand, lane);
      if (lane == j) sel = b;
    }
    __syncwarp();  // aux, written above, read below
    float sum = 0.0f;
#pragma unroll 8
    for (int e = 0; e < E; ++e) sum += aux[e];  // the reference's order
    if (lane < k && sel >= 0) w = aux[sel] / sum;
    float sel_sum = 0.0f;
#pragma unroll 8
    for (int j = 0; j < k; ++j) sel_sum += __shfl_sync(kFull, w, j);
    if (a.renormalize) w = w / sel_sum;
  } else {
    // sigmoid_grouped: b = sigmoid(l) + bias selects, the unbiased sigmoid weighs
    float b[NPL];
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const float s = portable_sigmoidf(v[i]);
      b[i] = a.bias ? s + bias[i] : s;
      if ((valid >> i) & 1u) {
        aux[lane + 32 * i] = s;
        score[lane + 32 * i] = b[i];
      }
    }
    __syncwarp();
    const int per = E / G;
    uint32_t cand = 0;
    if (a.topk_group < G) {
      // group score = sum of the 2 best b of the group: lane g runs the reference's sequential
      // scans of group g; then topk_group passes over the groups
      float gs[1] = {0.0f};
      uint32_t gcand = 0;
      if (lane < G) {
        gs[0] = group_score(score, lane, per);
        gcand = 1;
      }
      uint32_t kept = 0;
      for (int j = 0; j < a.topk_group; ++j) {
        const int g = reg_best<1>(gs, gcand, lane);
        if (g >= 0) kept |= 1u << g;
      }
#pragma unroll
      for (int i = 0; i < NPL; ++i)
        if (((valid >> i) & 1u) && ((kept >> ((lane + 32 * i) / per)) & 1u)) cand |= 1u << i;
    } else {
      cand = valid;  // every group is kept (E = G * per)
    }
    for (int j = 0; j < k; ++j) {
      const int bj = reg_best<NPL>(b, cand, lane);
      if (lane == j) sel = bj;
    }
    if (lane < k && sel >= 0) w = aux[sel];
    float sum = 0.0f;
#pragma unroll 8
    for (int j = 0; j < k; ++j) sum += __shfl_sync(kFull, w, j);  // the reference's order
    w = a.renormalize ? w / (sum + 1e-20f) : w;
    w = w * a.scaling;
  }
  if (lane < k) {
    a.weights[t * a.ws0 + lane * a.ws1] = w;
    a.ids[t * a.is0 + lane * a.is1] = sel;
  }
}

// The kernel for E, k and n_group: route_kernel_reg where its limits allow, else route_kernel.
using RouteKernel = void (*)(RouteKernelArgs);
RouteKernel route_kernel_for(int E, int k, int G) {
  if (k <= 32 && G <= 32) {
    if (E <= 4 * 32) return route_kernel_reg<4>;
    if (E <= 8 * 32) return route_kernel_reg<8>;
    if (E <= 12 * 32) return route_kernel_reg<12>;
    if (E <= 16 * 32) return route_kernel_reg<16>;
  }
  return route_kernel;
}

}  // namespace

void route(const RouteArgs& args) {
  const TensorView& L = args.router_logits;
  const int64_t T = L.shape[0], E = L.shape[1], k = args.top_k;
  if (T == 0) return;
  const bool grouped = args.routing.method == RoutingMethod::sigmoid_grouped;
  const int G = grouped ? args.routing.n_group : 1;
  const size_t per_warp = route_warp_bytes(int(E), G, int(k));
  const size_t smem = per_warp * kWarpsPerBlock;
  if (E > (1 << 20) || smem > 48 * 1024)
    detail::fail(ErrorKind::unsupported, "route: router_logits: got " + L.describe() + " with top_k " +
                                             std::to_string(k) + ", need E small enough for " +
                                             std::to_string(kWarpsPerBlock) +
                                             " warps' scores in 48 KiB of shared memory (E <= ~1400)");

  RouteKernelArgs a{};
  a.logits = static_cast<const float*>(L.data);
  a.ls0 = L.stride[0];
  a.ls1 = L.stride[1];
  a.bias = (grouped && args.correction_bias.present()) ? static_cast<const float*>(args.correction_bias.data)
                                                       : nullptr;
  a.bs = a.bias ? args.correction_bias.stride[0] : 0;
  a.ids = static_cast<int32_t*>(args.topk_ids.data);
  a.is0 = args.topk_ids.stride[0];
  a.is1 = args.topk_ids.stride[1];
  a.weights = static_cast<float*>(args.topk_weights.data);
  a.ws0 = args.topk_weights.stride[0];
  a.ws1 = args.topk_weights.stride[1];
  a.T = T;
  a.E = int(E);
  a.k = int(k);
  a.method = grouped ? 1 : 0;
  a.renormalize = args.routing.renormalize ? 1 : 0;
  a.n_group = G;
  a.topk_group = grouped ? args.routing.topk_group : 1;
  a.scaling = args.routing.routed_scaling_factor;

  int prev = 0;
  FP4MOE_CUDA_CHECK(cudaGetDevice(&prev));
  const int dev = L.device_id;
  if (dev != prev) FP4MOE_CUDA_CHECK(cudaSetDevice(dev));
  const unsigned blocks = unsigned((T + kWarpsPerBlock - 1) / kWarpsPerBlock);
  route_kernel_for(int(E), int(k), G)<<<blocks, 32 * kWarpsPerBlock, smem, static_cast<cudaStream_t>(args.stream)>>>(a);
  const cudaError_t err = cudaGetLastError();
  if (dev != prev) cudaSetDevice(prev);
  FP4MOE_CUDA_CHECK(err);
}

}  // namespace fp4moe::cuda
