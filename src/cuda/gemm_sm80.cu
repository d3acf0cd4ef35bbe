// The fast path's host side: the tile choice (choose_config) and GEMM 1's launch. The kernel is
// gemm_sm80_kernel.cuh's; GEMM 2's launch is gemm_sm80_gemm2.cu's, and the kernels with NVFP4
// activations are gemm_sm80_gemm{1,2}_fp4a.cu's: files of their own so that each compiles in
// about a minute on 2 cores.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>

#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_kernel.cuh"

namespace fp4moe::cuda {

namespace {

// P(X > n) for X ~ Poisson(mean): the share of experts with more than n rows when rows are
// routed uniformly (top-k of E, mean rows_bound / E per expert).
double poisson_tail_above(double mean, int n) {
  if (mean <= 0) return 0.0;
  double term = std::exp(-mean), cdf = term;  // term underflows to 0 past mean ~745: tail 1
  for (int k = 1; k <= n; ++k) {
    term *= mean / k;
    cdf += term;
  }
  return std::max(0.0, 1.0 - cdf);
}

std::atomic<int> g_token_tile{-1};  // sm80_token_tile: -1 not read yet; 0 the rule

}  // namespace

Gemm80Config choose_config(const Gemm80Problem& p, int forced_tile) {
  Gemm80Config c;
  const int64_t active = std::max<int64_t>(1, std::min(p.num_experts, p.rows_bound));
  const double mean = double(p.rows_bound) / double(active);  // rows per active expert if spread evenly
  c.token_tile = 32;
  for (int t : {8, 16, 24})
    if (poisson_tail_above(mean, t) <= sm80_tile_max_spill(t)) {
      c.token_tile = t;
      break;
    }
  char why[160];
  std::snprintf(why, sizeof why, "%.1f rows per active expert: P(rows > %d) = %.3f", mean, c.token_tile,
                poisson_tail_above(mean, c.token_tile));
  c.why = why;
  if (forced_tile == 8 || forced_tile == 16 || forced_tile == 24 || forced_tile == 32) {
    c.token_tile = forced_tile;
    c.why = "token tile " + std::to_string(forced_tile) + " forced (FP4MOE_SM80_TILE or set_sm80_token_tile)";
  }
  c.row_tile = 128;
  c.grid_x = (p.N + c.row_tile - 1) / c.row_tile;
  // sum_e ceil(count_e / tile) <= rows_bound / tile + E, and <= rows_bound (a tile has a row).
  c.tiles = std::min<int64_t>((p.rows_bound + c.token_tile - 1) / c.token_tile + p.num_experts, p.rows_bound);
  c.grid_y = std::min<int64_t>(c.tiles, 65535);
  return c;
}

int sm80_token_tile() {
  return choice_once(g_token_tile, [] { return env_int("FP4MOE_SM80_TILE", 0); });
}

void set_sm80_token_tile(int tile) { g_token_tile.store(tile, std::memory_order_relaxed); }

namespace {

// One warp per slot: find_slot's answer (kPer experts per lane and step) for slot
// blockIdx.x * (blockDim.x / 32) + warp, written by its lane 0 straight to expert[slot] and tile[slot].
template <int kTok, int kPer>
__global__ void find_slots_kernel(const int32_t* count, int64_t num_experts, TileSpan span, SpanCut cut, int64_t slots,
                                  int32_t* expert, int32_t* tile) {
  const int64_t slot = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (slot >= slots) return;  // warp-uniform
  sm80::find_slot<kTok, kPer>(slot, count, num_experts, int(threadIdx.x % 32), &expert[slot], &tile[slot], span, cut);
}

// One thread per word: frag_decode_word's four registers of words[i] into out[4 i .. 4 i + 3],
// the selectors' upper halves moved down by shifts or (kHighByF16) by f16 multiplies.
template <bool kHighByF16>
__global__ void frag_decode_words_kernel(const uint32_t* words, int64_t n, uint32_t* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t a[4];
  frag_decode_word<kHighByF16>(words[i], a);
  for (int j = 0; j < 4; ++j) out[4 * i + j] = a[j];
}

__global__ void high_half_by_f16_mul_kernel(const uint32_t* x, int64_t n, uint32_t* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ptx::high_half_by_f16_mul(x[i]);
}

}  // namespace

void find_slots_for_test(const int32_t* count, int64_t num_experts, int tok, int per, TileSpan span, SpanCut cut,
                         int64_t slots, int32_t* expert, int32_t* tile, cudaStream_t stream) {
  if (tok != 8 && tok != 64) detail::fail_arg("find_slots_for_test: tok: got " + std::to_string(tok) + ", need 8 or 64");
  if (per != sm80::kFindSlotPerLane && per != sm80::kSm90FindSlotPerLane)
    detail::fail_arg("find_slots_for_test: per: got " + std::to_string(per) + ", need " +
                     std::to_string(sm80::kFindSlotPerLane) + " or " + std::to_string(sm80::kSm90FindSlotPerLane));
  if (slots <= 0) return;
  const dim3 grid(unsigned((slots + 7) / 8)), block(256);
  const auto launch = [&](auto kernel) {
    kernel<<<grid, block, 0, stream>>>(count, num_experts, span, cut, slots, expert, tile);
  };
  constexpr int k8 = sm80::kFindSlotPerLane, k1 = sm80::kSm90FindSlotPerLane;
  if (tok == 8) launch(per == k8 ? find_slots_kernel<8, k8> : find_slots_kernel<8, k1>);
  else launch(per == k8 ? find_slots_kernel<64, k8> : find_slots_kernel<64, k1>);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void frag_decode_words_for_test(const uint32_t* words, int64_t n, bool high_by_f16, uint32_t* out,
                                cudaStream_t stream) {
  if (n < 0) detail::fail_arg("frag_decode_words_for_test: n: got " + std::to_string(n) + ", need >= 0");
  if (n == 0) return;
  const dim3 grid(unsigned((n + 255) / 256)), block(256);
  if (high_by_f16) frag_decode_words_kernel<true><<<grid, block, 0, stream>>>(words, n, out);
  else frag_decode_words_kernel<false><<<grid, block, 0, stream>>>(words, n, out);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void high_half_by_f16_mul_for_test(const uint32_t* x, int64_t n, uint32_t* out, cudaStream_t stream) {
  if (n < 0) detail::fail_arg("high_half_by_f16_mul_for_test: n: got " + std::to_string(n) + ", need >= 0");
  if (n == 0) return;
  high_half_by_f16_mul_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(x, n, out);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

void sm80_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  const Gemm80Problem pb{a.rows.rows_bound, cw.w13.num_experts, cw.w13.N, cw.w13.K};
  const Gemm80Config c = choose_config(pb, sm80_token_tile());
  sm80::log_choice("gemm1", pb, c);
  if (c.grid_y == 0) return;
  sm80::Params p = sm80::base_params(cw.w13, a.rows, a.a_bf16, a.a_fp4, a.a_scale, a.a_dq, c.tiles);
  p.a_gather = a.a_gather;
  p.epi = sm80::gemm1_epilogue(cw.desc, a);
  // as the dependent of the kernel before it (Gemm1Args::after_kernel), as the decode kernels
  const bool dependent = a.after_kernel && sm80_pdl(cw.device);
  if (a.a_fp4) sm80::launch_gemm1_fp4a(c, p, dependent, stream);
  else sm80::launch<false, true>(c, p, dependent, stream);
}

bool sm80_pdl(int device) {
  return !env_switch("FP4MOE_SM80_PDL", '0') && decode_pdl(device);
}

}  // namespace fp4moe::cuda
