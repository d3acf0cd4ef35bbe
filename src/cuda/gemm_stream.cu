// The weight-streaming decode path of the grouped GEMMs (FP4MOE_GEMM=stream; sm_80 and later).
// Measured on the H200 (bench/results/2026-11-30-notes.md): 12-32% slower than the fast path
// at 1-512 tokens (kimi-k2), so it is not a default; kept for comparison.
//
// Why: at decode (a few rows per expert) a GEMM is a stream of FP4 weights that must run at
// HBM speed. The tiled paths spend a large share of each CTA's life on per-CTA work that
// moves no bytes (a warp scan over count[] to find the CTA's expert, row tables, pipeline
// fill and drain). Here every warp streams on its own:
//   - the active experts (count > 0) are listed once per forward (gemm_prepare_rows; once
//     per GEMM when called alone), in expert order, by a one-CTA kernel, so a unit's expert
//     is one load;
//   - a unit is (active expert, 32 weight rows = two m16 fragment rows, or 16 rows when
//     32-row units would leave resident warps idle, as at T = 1, and the layer's h is not
//     requantized to NVFP4, which needs 16 i = 32 rows in one warp); units are dealt
//     round-robin to the warps of a grid of at most 4 CTAs per SM;
//   - a warp streams its unit's rows over the whole K through its own 8-stage cp.async
//     ring in shared memory (one fragment block column per stage: up to 1 KiB of weights
//     and their scales), with no __syncthreads: up to ~7 KiB in flight per warp;
//   - the tokens are the MMA's N (swap-AB): each lane loads its B-fragment words straight
//     from the activation rows (L1/L2-resident at decode), NT n8 tiles (8 or 16 tokens) per
//     pass; an expert with more rows takes several passes over its weights.
// Each unit covers the whole K, so there is no split and no second pass: results are
// deterministic, and the epilogue (gemm_sm80_core.cuh, shared with the fast path) applies
// the global scale, bias, activation, bf16 rounding and NVFP4 requantization in registers.
// The MMA and the in-register dequantization are the fast path's (swap-AB, mma.m16n8k16,
// weights decoded to bf16 exactly with the folded block scale).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/gemm_internal.hpp"
#include "cuda/gemm_sm80_core.cuh"

namespace fp4moe::cuda {

StreamConfig choose_stream_config(const StreamProblem& p) {
  StreamConfig c;
  const int64_t active = std::max<int64_t>(1, std::min(p.num_experts, p.rows_bound));
  const int64_t per_expert = (p.rows_bound + active - 1) / active;
  if (p.rows_bound <= 0 || p.N <= 0) {
    c.why = "no work";
    return c;
  }
  if (per_expert > 16) {
    c.why = "more than 16 rows per active expert: the tiled path reuses weights better";
    return c;
  }
  c.token_tiles = per_expert <= 8 ? 1 : 2;
  const int64_t max_ctas = int64_t(std::max(1, p.num_sms)) * kStreamCtasPerSm;
  // 16-row units where 32-row units leave warp slots idle (and the epilogue allows it)
  const int NB = p.N / kFragRows;
  c.unit_tiles = !p.pairs_needed && active * ((NB + 1) / 2) < max_ctas * kStreamWarps ? 1 : 2;
  c.units_per_expert = (NB + c.unit_tiles - 1) / c.unit_tiles;
  const int64_t units = active * c.units_per_expert;
  c.grid = std::clamp<int64_t>((units + kStreamWarps - 1) / kStreamWarps, 1, max_ctas);
  c.why = "decode: " + std::to_string(c.token_tiles * 8) + " tokens per pass, " +
          std::to_string(c.unit_tiles * kFragRows) + "-row units, " + std::to_string(c.grid) + " CTAs";
  return c;
}

size_t stream_scratch_bytes(int64_t num_experts) { return size_t(num_experts + 1) * sizeof(int32_t); }

namespace {

constexpr int kWarps = kStreamWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kStages = kStreamStages;
// One stage: two fragment blocks (512 B each) of the unit's m16 tiles, then their scales
// (64 B each for NVFP4, 32 B used for MX).
constexpr int kStageBytes = 2 * kFragWords * 4 + 2 * 64;
static_assert(kWarps * kStages * kStageBytes <= 45 * 1024, "the rings must fit in static shared memory");
static_assert(kStageBytes % 16 == 0, "cp.async destinations must stay 16-byte aligned");

struct Params {
  WeightMatrix w;
  ExpertRows rows;
  const int32_t* active;  // [1 + E]: number of active experts, then their ids in order
  const uint16_t* a_bf16;
  const uint8_t* a_fp4;
  const uint8_t* a_scale;
  const int32_t* a_gather;
  float a_mult;           // a_dq, times 2^8 for NVFP4 A (decoded as e2m1 * e4m3 * 2^-8)
  int units_per_expert;
  sm80::Epilogue epi;
};

// One CTA: active[0] = number of experts with count > 0, active[1..] their ids, ascending.
__global__ void __launch_bounds__(1024) stream_active_list(const int32_t* count, int64_t num_experts,
                                                           int32_t* active) {
  __shared__ int warp_total[32];
  __shared__ int base;
  const int lane = int(threadIdx.x) % 32, wid = int(threadIdx.x) / 32;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int64_t e0 = 0; e0 < num_experts; e0 += blockDim.x) {
    const int64_t e = e0 + threadIdx.x;
    const bool on = e < num_experts && count[e] > 0;
    const unsigned m = __ballot_sync(0xFFFFFFFFu, on);
    if (lane == 0) warp_total[wid] = __popc(m);
    __syncthreads();
    int at = base;
    for (int i = 0; i < wid; ++i) at += warp_total[i];
    if (on) active[1 + at + __popc(m & ((1u << lane) - 1u))] = int(e);
    __syncthreads();  // everyone has read base and warp_total
    if (threadIdx.x == 0) {
      int s = 0;
      for (int i = 0; i < int(blockDim.x) / 32; ++i) s += warp_total[i];
      base += s;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) active[0] = base;
}

// B fragments of the k-block at k0 for token row `row` (-1: none): b[kk] = b0, b1 of k-step kk
// (MMA positions 16kk + 2t + {0, 1} and + 8: logical k 16t + 4kk + {0, 1} and {2, 3},
// gemm_internal.hpp kperm), zero past K or without a row. GEMM 1's x is logical: lane t reads
// its block, logical k k0 + 16t .. + 15, in one piece; GEMM 2's h is k-permuted (rows of Kp,
// zeros past K).
template <bool A_FP4, bool GEMM1>
__device__ __forceinline__ void load_b(const Params& p, int64_t row, int k0, int t, uint32_t (&b)[4][2]) {
  const int K = p.w.K, a_row = GEMM1 ? K : p.w.Kp;
  const int kl = k0 + 16 * t;                // the lane's logical block (K % 16 == 0: all in or all out)
  const bool ok = row >= 0 && (!GEMM1 || kl < K);
  const bool sc_ok = row >= 0 && kl < K;
  if constexpr (!A_FP4) {
    if constexpr (GEMM1) {
      const uint4* a = reinterpret_cast<const uint4*>(p.a_bf16 + (ok ? row * a_row + kl : 0));
      const uint4 lo = ok ? __ldg(a) : make_uint4(0u, 0u, 0u, 0u), hi = ok ? __ldg(a + 1) : make_uint4(0u, 0u, 0u, 0u);
      b[0][0] = lo.x, b[0][1] = lo.y, b[1][0] = lo.z, b[1][1] = lo.w;
      b[2][0] = hi.x, b[2][1] = hi.y, b[3][0] = hi.z, b[3][1] = hi.w;
    } else {
      const uint32_t* a = reinterpret_cast<const uint32_t*>(p.a_bf16 + (ok ? row * a_row + k0 : 0));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        b[kk][0] = ok ? __ldg(a + 8 * kk + t) : 0u;
        b[kk][1] = ok ? __ldg(a + 8 * kk + 4 + t) : 0u;
      }
    }
  } else {
    const uint8_t* a = p.a_fp4 + (ok ? row * (a_row / 2) + k0 / 2 : 0);
    const uint32_t sc = sm80::e4m3_scale_bf16x2(sc_ok ? __ldg(p.a_scale + row * (K / 16) + kl / 16) : 0u);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int i0 = GEMM1 ? 8 * t + 2 * kk : 8 * kk + t, i1 = GEMM1 ? i0 + 1 : i0 + 4;
      const uint32_t x0 = ok ? __ldg(a + i0) : 0u, x1 = ok ? __ldg(a + i1) : 0u;
      b[kk][0] = ptx::mul_bf16x2(ptx::e2m1x2_top_nibbles_to_bf16x2((x0 << 12) | (x0 << 24)), sc);
      b[kk][1] = ptx::mul_bf16x2(ptx::e2m1x2_top_nibbles_to_bf16x2((x1 << 12) | (x1 << 24)), sc);
    }
  }
}

template <int NT, int MT, bool A_FP4, bool GEMM1>
__global__ void __launch_bounds__(kThreads, kStreamCtasPerSm) stream_gemm(const Params p) {
  __shared__ __align__(128) uint8_t smem[kWarps * kStages * kStageBytes];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const WeightMatrix& w = p.w;
  const int KB = w.Kp / kFragK, NB = w.N / kFragRows;
  const int sb = frag_scale_bytes(w.block), chunks = sb / 16;
  const uint32_t decode_low = sm80::decode_table(w);
  const bool mx = w.block == 32;
  const int s_off = sm80::scale_word_offset(g, t, sb), s_byte = sm80::scale_word_byte(t, mx);
  uint8_t* ring = smem + warp * (kStages * kStageBytes);
  // A grid launched as this one's dependent (GEMM 2 after GEMM 1, FP4MOE_PDL=1) may start
  // now: it streams its own weights until it needs this grid's output.
  ptx::grid_dependency_trigger();
  // Read before grid_dependency_wait: the active list, count and begin, written before the
  // grid this one may depend on started (launch_stream_gemm), and the weights.
  const int64_t units = int64_t(p.active[0]) * p.units_per_expert;

  for (int64_t u = int64_t(blockIdx.x) * kWarps + warp; u < units; u += int64_t(gridDim.x) * kWarps) {
    const int e = p.active[1 + u / p.units_per_expert];
    const int nb0 = int(u % p.units_per_expert) * MT;  // the unit's first fragment row
    const bool two = MT == 2 && nb0 + 1 < NB;           // warp-uniform; true for GEMM 1 with MT = 2
    const int count = p.rows.count[e];
    const int64_t begin = p.rows.begin[e];
    // Row nb0's k-block kb is block (frag_block) b0 + kb * kFragGroup, row nb0 + 1's the next
    // (nb0 is even when the unit has two).
    const int64_t b0 = frag_block(e, nb0, 0, w.groups, KB);
    const uint32_t* q0 = w.q + b0 * kFragWords;
    const uint8_t* s0 = w.scale + b0 * sb;

    // Stage kb % kStages <- fragment block column kb of both m16 tiles (nothing past KB).
    auto issue = [&](int kb) {
      if (kb < KB) {
        uint8_t* st = ring + (kb % kStages) * kStageBytes;
        ptx::cp_async_16(st + lane * 16, q0 + int64_t(kb) * kFragGroup * kFragWords + lane * 4, true);
        if (two)
          ptx::cp_async_16(st + 512 + lane * 16, q0 + (int64_t(kb) * kFragGroup + 1) * kFragWords + lane * 4, true);
        if (lane < 2 * chunks) {
          const int mt = lane / chunks, c = lane % chunks;
          if (mt == 0 || two)
            ptx::cp_async_16(st + 1024 + mt * 64 + c * 16, s0 + (int64_t(kb) * kFragGroup + mt) * sb + c * 16, true);
        }
      }
      ptx::cp_async_commit_group();
    };

    for (int tok0 = 0; tok0 < count; tok0 += 8 * NT) {
      // This lane's B rows: token tok0 + nt * 8 + g of the expert (its A row), or -1.
      int64_t arow[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int j = tok0 + nt * 8 + g;
        const int64_t r = begin + j;
        arow[nt] = j < count ? (p.a_gather ? int64_t(p.a_gather[r]) : r) : -1;
      }
      float acc[2][NT][4];
      sm80::zero_acc<NT>(acc);

#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) issue(s);
      ptx::grid_dependency_wait();  // A (GEMM 2: h) is the previous grid's output; outputs follow
      for (int kb = 0; kb < KB; ++kb) {
        uint32_t b[NT][4][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) load_b<A_FP4, GEMM1>(p, arow[nt], kb * kFragK, t, b[nt]);
        ptx::cp_async_wait_group<kStages - 2>();
        __syncwarp();  // stage kb visible to the whole warp; stage kb - 1 consumed by all lanes
        issue(kb + kStages - 1);
        const uint8_t* st = ring + (kb % kStages) * kStageBytes;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          if (mt == 1 && !two) break;
          uint4 wq;
          uint32_t ws;
          sm80::load_weight_frag(st + mt * 512, st + 1024 + mt * 64, lane, s_off, wq, ws);
          const uint32_t sp = sm80::scale_rows_bf16x2(ws, s_byte, mx);  // once for the four k-steps (kperm)
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) {
            uint32_t a[4];
            sm80::weight_a_frag(a, wq, sp, kk, decode_low);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) ptx::mma_m16n8k16_bf16(acc[mt][nt], a, b[nt][kk][0], b[nt][kk][1]);
          }
        }
      }
      ptx::cp_async_wait_group<0>();
      __syncwarp();  // the ring is refilled by the next pass or unit

      const float mult = w.epi[e] * p.a_mult;
      auto out_row = [&](int nt, int c) -> int64_t {
        const int j = tok0 + nt * 8 + 2 * t + c;
        return j < count ? begin + j : -1;
      };
      if constexpr (GEMM1) sm80::epilogue_gemm1<NT>(p.epi, w, e, nb0, g, mult, acc, out_row, two ? 2 : 1);
      else sm80::epilogue_gemm2<NT>(p.epi, w, e, nb0, g, mult, acc, out_row, two ? 2 : 1);
    }
  }
}

// One launch; with `dependent`, as a programmatic dependent of the previous kernel on the
// stream (it may start before that kernel ends and waits for it in grid_dependency_wait).
template <int NT, int MT, bool A_FP4, bool GEMM1>
void launch_one(unsigned grid, const Params& p, bool dependent, cudaStream_t stream) {
  launch_kernel(stream_gemm<NT, MT, A_FP4, GEMM1>, dim3(grid), dim3(kThreads), 0, dependent, stream, p);
}

// The listed instantiations: tokens per pass {8, 16} x unit rows {16 (bf16 A only), 32}.
template <bool A_FP4, bool GEMM1>
void launch(const StreamConfig& c, const Params& p, bool dependent, cudaStream_t stream) {
  const unsigned grid = unsigned(c.grid);
  if constexpr (!A_FP4) {
    if (c.unit_tiles == 1) {
      if (c.token_tiles == 1) launch_one<1, 1, A_FP4, GEMM1>(grid, p, dependent, stream);
      else launch_one<2, 1, A_FP4, GEMM1>(grid, p, dependent, stream);
      return;
    }
  }
  if (c.token_tiles == 1) launch_one<1, 2, A_FP4, GEMM1>(grid, p, dependent, stream);
  else launch_one<2, 2, A_FP4, GEMM1>(grid, p, dependent, stream);
}

// FP4MOE_PDL=1 on an sm_90+ device: GEMM 2 is launched as a programmatic dependent of GEMM 1
// (measured on the H200: slower than without, bench/results/2026-11-30-notes.md). Only when the active list came from gemm_prepare_rows:
// then everything GEMM 2 reads before grid_dependency_wait was complete before GEMM 1
// (an ordinary launch) started.
bool gemm2_dependent(const CudaWeights& cw, const ExpertRows& rows) {
  if (!env_switch("FP4MOE_PDL", '1') || !rows.active) return false;
  return pdl_capable(stream_gemm<1, 2, false, false>, cw.device);  // one GEMM 2 kernel that launch() runs
}

// FP4MOE_LOG=1: each config once per shape.
void log_choice(const char* which, const StreamProblem& pb, const StreamConfig& c) {
  if (!gemm_log_on()) return;
  char line[512];
  std::snprintf(line, sizeof line, "%s stream rows_bound=%lld E=%lld N=%d SMs=%d -> %s (%s)", which,
                (long long)pb.rows_bound, (long long)pb.num_experts, pb.N, pb.num_sms,
                c.token_tiles ? "stream" : "fast path", c.why.c_str());
  gemm_log(line);
}

// Config of one GEMM (token_tiles 0: run the fast path); checks the caller's scratch.
StreamConfig plan(const char* which, const CudaWeights& cw, const WeightMatrix& w, const ExpertRows& rows,
                  const void* scratch, size_t scratch_bytes, bool pairs_needed) {
  const StreamProblem pb{rows.rows_bound, w.num_experts, w.N, multiprocessor_count(cw.device), pairs_needed};
  StreamConfig c = choose_stream_config(pb);
  log_choice(which, pb, c);
  if (!c.token_tiles || !scratch) {
    c.token_tiles = 0;
    return c;
  }
  const size_t need = stream_scratch_bytes(w.num_experts);
  if (scratch_bytes < need)
    detail::fail_arg(std::string(which) + ": partials_bytes: got " + std::to_string(scratch_bytes) + ", need >= " +
                     std::to_string(need) + " (gemm_scratch_bytes)");
  return c;
}

Params base_params(const StreamConfig& c, const WeightMatrix& w, const ExpertRows& rows, const int32_t* active,
                   const uint16_t* a_bf16, const uint8_t* a_fp4, const uint8_t* a_scale, float a_dq) {
  Params p{};
  p.w = w;
  p.rows = rows;
  p.active = active;
  p.a_bf16 = a_bf16;
  p.a_fp4 = a_fp4;
  p.a_scale = a_scale;
  p.a_mult = a_fp4 ? a_dq * exp2i(kNvfp4Fold) : a_dq;
  p.units_per_expert = c.units_per_expert;
  return p;
}

// The list gemm_prepare_rows built, or one built now into the scratch.
const int32_t* active_list(const WeightMatrix& w, const ExpertRows& rows, float* scratch, cudaStream_t stream) {
  if (rows.active) return rows.active;
  int32_t* active = reinterpret_cast<int32_t*>(scratch);
  stream_list_active(rows, w.num_experts, active, stream);
  return active;
}

}  // namespace

void stream_list_active(const ExpertRows& rows, int64_t num_experts, int32_t* active, cudaStream_t stream) {
  const int threads = int(std::clamp<int64_t>((num_experts + 31) / 32 * 32, 32, 1024));
  stream_active_list<<<1, threads, 0, stream>>>(rows.count, num_experts, active);
  FP4MOE_CUDA_CHECK_LAUNCH();
}

bool stream_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  // NVFP4 h (W4A4) is requantized in 16-i blocks = 32 rows; NVFP4 A has no 16-row kernels
  const bool pairs = a.h_fp4 != nullptr || a.a_fp4 != nullptr;
  const StreamConfig c = plan("gemm1", cw, cw.w13, a.rows, a.partials, a.partials_bytes, pairs);
  if (!c.token_tiles) return false;
  const int32_t* active = active_list(cw.w13, a.rows, a.partials, stream);
  Params p = base_params(c, cw.w13, a.rows, active, a.a_bf16, a.a_fp4, a.a_scale, a.a_dq);
  p.a_gather = a.a_gather;
  p.epi = sm80::gemm1_epilogue(cw.desc, a);
  if (a.a_fp4) launch<true, true>(c, p, false, stream);
  else launch<false, true>(c, p, false, stream);
  return true;
}

bool stream_gemm2(const CudaWeights& cw, const Gemm2Args& a, cudaStream_t stream) {
  const StreamConfig c = plan("gemm2", cw, cw.w2, a.rows, a.partials, a.partials_bytes, a.a_fp4 != nullptr);
  if (!c.token_tiles) return false;
  const int32_t* active = active_list(cw.w2, a.rows, a.partials, stream);
  Params p = base_params(c, cw.w2, a.rows, active, a.a_bf16, a.a_fp4, a.a_scale, a.a_dq);
  p.epi.y = a.y;
  const bool dependent = gemm2_dependent(cw, a.rows);
  if (a.a_fp4) launch<true, false>(c, p, dependent, stream);
  else launch<false, false>(c, p, dependent, stream);
  return true;
}

}  // namespace fp4moe::cuda
