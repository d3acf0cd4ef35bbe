// Probe: do an RS wgmma's MMAs overlap the weight decode of the warps that issue them?
//
// Question (notes v59 §2, v60): in rsws4 (four consumer warpgroups, A decoded from FP4 into
// registers, wgmma m64nNk16 with A from registers) taking away either the decode or the wgmma
// makes the kernel 17-31% faster, and ncu has the ALU pipe at 54%, the tensor pipe at 52% and
// issue at 57%: the two do not overlap, and neither pipe is full. Is that the hardware (an RS
// wgmma's issue waits for the tensor pipe, so the warp cannot decode meanwhile) or the kernel
// (its barriers, its producer, its ring)?
//
// Here the consumers' k loop alone, without producer, barriers or global memory: per k-block a
// warp loads its 16 weight rows' words and scale bytes from shared memory (a ring of 4 k-blocks
// of random bits), decodes them with the kernels' own decode (sm80::weight_a_frag) and its
// warpgroup issues 4 wgmma m64nNk16 (B: 8N tokens x 64 k in shared memory, 128-byte swizzle) as
// one group. One CTA per SM, kWG warpgroups, `iters` k-blocks each. Modes:
//   0 decode only (the A registers pass through a register fence, no wgmma)
//   1 wgmma only (A decoded once before the loop)
//   2 both, as rsws4: decode k-block j into set j % 2, issue, commit, wait_group 1
//   3 both, three A sets and wait_group 2 (two groups in flight while a warp decodes)
//   4 both, software-pipelined: k-step kk of k-block j + 1 decoded right after k-step kk's
//     wgmma of k-block j is issued (three sets: the set written was read by group j - 2)
//   5 roles apart: warpgroups [0, kWG / 2) issue wgmma only (as 1), the others decode only
//     (as 0): whether one warp's RS wgmma slows the decode of other warps on its SM
//   6 as 5 with the wgmma SS (A from shared memory): 64- and 128-token tiles only
//   7, 8, 9 as 2, 0, 5 with the decode through a table in shared memory (v92), the words in a
//     byte layout (a_j's two codes in byte j); 10, 11, 12 the same on the kernels' own layout
//     (two lookups and a PRMT per register; see lds_table_entry)
// Prints cycles per k-block per CTA (clock64 of each warpgroup's first thread, the slowest)
// against the MMA's own: kWG x 4 x (8N / 64 x 32) cycles at 2048 bf16 FMA per cycle per SM; for
// modes 5 and 6 the MMA warpgroups' and the decoding warpgroups' cycles apart. Then alu_probe
// (below): single instruction kinds beside back-to-back wgmma.
//
// Answer (v60, `bench/results/2026-12-04-v60/call5`, `call6`; notes v60 §2): the hardware. Mode 2
// takes the sum of modes 0 and 1 and more at one warpgroup (287 cycles against 130 + 128), most
// of it (78-94%) at two and four; three A sets and the pipelined order change it by <= 3%.
// Warps that only decode run 1.45-2.05x slower beside another warpgroup's wgmma (RS or SS alike):
// ~0.55 decode cycles lost per MMA cycle. LOP3 / PRMT 2.3x and HMUL2 3.7x slower beside them.
// v61 (`bench/results/2026-12-04-v61/call3` to `call5`; notes v61 §2): it is the pipes, not the
// register reads or the issue slots. With three warps a scheduler (enough to cover latency
// alone), beside 64-token wgmma (RS or SS) a scheduler issues 0.27-0.29 a cycle of LOP3, SHF,
// PRMT, IADD3 (ALU pipe) and of IMAD, HMUL2 (the FMA pipe's integer and bf16x2 instructions),
// against 0.49 (0.79 HMUL2) alone; one register source or three makes no difference. fp32
// FFMA and FMUL keep 0.60 / 0.84 of 0.64 / 0.91 (94 / 92%); LOP3 in turn with VIADD keeps 0.67
// of 0.86. F2FP (fp32 pair -> bf16x2) loses as the ALU kinds (0.28); I2FP is quarter rate. The
// decode is all in the first group.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include -o rs_overlap bench/probes/rs_overlap.cu
// Run:   ./rs_overlap [iters] [alu | lds]   (alu: the alu_probe rows alone; lds: modes 7-12 beside
//        0, 2 and 5, after the table decodes' check)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "cuda/common/ptx_sm90.cuh"
#include "cuda/gemm_sm80_core.cuh"
#include "probe_check.cuh"

namespace {

using namespace fp4moe::cuda;

constexpr int kRing = 4;            // k-blocks in the shared ring
constexpr int kWordsBytes = 512;    // a warp's fragment block (16 rows x 64 k of e2m1)
constexpr int kScaleBytes = 64;     // its scale bytes (NVFP4: 8 g x 4 c x 2 halves)

template <int NU, int kWG>
struct Layout {
  static constexpr int kBBytes = NU * 8 * 128;  // 8N tokens x 64 bf16
  static constexpr int kABytes = 64 * 128;      // mode 6: 64 weight rows x 64 bf16
  static constexpr int kWarps = kWG * 4;
  static constexpr int kWBytes = kWarps * (kWordsBytes + kScaleBytes);
  static constexpr int kSlot = (kBBytes + kABytes + kWBytes + 1023) / 1024 * 1024;
  static constexpr int kSmem = kRing * kSlot + 1024;
};

// Modes 7-12 (v92): the weight decode through a table in shared memory instead of PRMT tables.
// Entry b of a 256-entry table is the bf16x2 of two e2m1 values (x 2^-126, as frag_decode_word's)
// that byte b of a word holds. Each lane has its own copy (bank = lane): entry b of lane l at
// table + 256 b + 4 l, so with the table 64 KiB-aligned and lane_base = table | 4 l, one PRMT
// (byte 1 from the word, the others from lane_base) forms the address. 64 KiB of shared memory,
// half of it unused (the rows' upper 128 bytes).
// - Modes 7-9, the byte layout: byte j holds register a_j's two codes (nibble 2j low, 2j + 1
//   high: the logical word, which the kernels' memory layout permutes, frag_word_store). A word
//   is 4 PRMT + 4 LDS before the scale's 4 HMUL2, against 4 PRMT + 2 LOP3 + 3 SHF.
// - Modes 10-12, the kernels' own layout: stored byte 2i holds nibbles i and i + 4 (a_i's low
//   value and a_(i+2)'s), byte 2i + 1 their high values, each code as frag_stored_code's two
//   2-bit halves (bits 1-0 and 5-4 the first, 3-2 and 7-6 the second). Entry b: the first
//   code's bf16 low, the second's high; then a PRMT per register joins the halves: 4 PRMT +
//   4 LDS + 4 PRMT before the HMUL2 (12 contended instructions a word against 13), on memory as
//   it is.
constexpr int kLdsSmem = 200 * 1024;
// The mode whose loop a table mode runs (7 / 10 as 2, 8 / 11 as 0, 9 / 12 as 5).
__host__ __device__ constexpr int base_mode(int mode) {
  return mode == 7 || mode == 10 ? 2 : mode == 8 || mode == 11 ? 0 : mode == 9 || mode == 12 ? 5 : mode;
}
__host__ __device__ constexpr uint32_t e2m1_bf16_bits(uint32_t c) {
  return (c & 8u) << 12 | ((c >> 1) & 3u) << 7 | (c & 1u) << 6;
}
// Entry b of either table. The words' nibbles are stored codes (frag_stored_code: the e2m1
// code's two low bits swapped).
template <bool kStored>
__device__ __forceinline__ uint32_t lds_table_entry(uint32_t b) {
  const uint32_t first = kStored ? (b & 3u) | ((b >> 4) & 3u) << 2 : b & 15u;
  const uint32_t second = kStored ? ((b >> 2) & 3u) | ((b >> 6) & 3u) << 2 : b >> 4;
  return e2m1_bf16_bits(frag_stored_code(first)) | e2m1_bf16_bits(frag_stored_code(second)) << 16;
}
template <bool kStored>
__device__ __forceinline__ void lds_table_fill(uint32_t table) {
  for (int i = threadIdx.x; i < 0x10000 / 4; i += blockDim.x) {
    const uint32_t v = (i & 63) < 32 ? lds_table_entry<kStored>(uint32_t(i) >> 6) : 0u;
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(table + uint32_t(i) * 4u), "r"(v) : "memory");
  }
}
// A table entry: a pure function of its address while the table stands (no volatile, so the
// compiler may order the loads freely).
__device__ __forceinline__ uint32_t lds_entry(uint32_t a) {
  uint32_t v;
  asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
// The four entries of a word's bytes: a_0..a_3 (byte layout), or the halves to join (kernels'
// layout).
__device__ __forceinline__ void lds_decode_word(uint32_t q, uint32_t lane_base, uint32_t (&v)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = lds_entry(byte_perm(q, lane_base, 0x7604u | uint32_t(j) << 4));
}
__device__ __forceinline__ void lds_decode_stored_word(uint32_t q, uint32_t lane_base, uint32_t (&a)[4]) {
  uint32_t v[4];
  lds_decode_word(q, lane_base, v);
  a[0] = byte_perm(v[0], v[1], 0x5410u);
  a[1] = byte_perm(v[2], v[3], 0x5410u);
  a[2] = byte_perm(v[0], v[1], 0x7632u);
  a[3] = byte_perm(v[2], v[3], 0x7632u);
}
#if defined(FP4MOE_SM90A)  // (rs_probe's sm_90a body alone calls it)
// weight_a_frag through the table.
template <bool kStored>
__device__ __forceinline__ void lds_weight_a_frag(uint32_t (&a)[4], const uint4& wq, uint32_t s, int kk,
                                                  uint32_t lane_base) {
  const uint32_t q = kk == 0 ? wq.x : kk == 1 ? wq.y : kk == 2 ? wq.z : wq.w;
  uint32_t v[4];
  if constexpr (kStored)
    lds_decode_stored_word(q, lane_base, v);
  else
    lds_decode_word(q, lane_base, v);
  a[0] = ptx::mul_bf16x2_low(v[0], s);
  a[1] = ptx::mul_bf16x2_high(v[1], s);
  a[2] = ptx::mul_bf16x2_low(v[2], s);
  a[3] = ptx::mul_bf16x2_high(v[3], s);
}
#endif
// The table decode of n words (its layout's table at lane_base) against frag_decode_word of the
// same words in the kernels' layout: registers that differ counted into *bad.
template <bool kStored>
__device__ void lds_check_words(const uint32_t* words, int n, uint32_t lane_base, unsigned* bad) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    uint32_t v[4], r[4];
    if constexpr (kStored)
      lds_decode_stored_word(words[i], lane_base, v);
    else
      lds_decode_word(words[i], lane_base, v);
    frag_decode_word(kStored ? words[i] : frag_word_store(words[i]), r);
    for (int j = 0; j < 4; ++j)
      if (v[j] != r[j]) atomicAdd(bad, 1u);
  }
}
// Both tables checked in turn: bad[0] the byte layout's, bad[1] the kernels' layout's; bad[2] = 1
// when the table did not fit.
__global__ void lds_check(const uint32_t* words, int n, unsigned* bad) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t table = (raw + 0xFFFFu) & ~0xFFFFu;
  if (table + 0x10000u > raw + uint32_t(kLdsSmem)) {
    if (threadIdx.x == 0) bad[2] = 1;
    return;
  }
  const uint32_t lane_base = table | uint32_t((threadIdx.x % 32) * 4);
  lds_table_fill<false>(table);
  __syncthreads();
  lds_check_words<false>(words, n, lane_base, &bad[0]);
  __syncthreads();
  lds_table_fill<true>(table);
  __syncthreads();
  lds_check_words<true>(words, n, lane_base, &bad[1]);
}

template <int NU, int kWG, int MODE>
__global__ void __launch_bounds__(kWG * 128, 1) rs_probe(int iters, const uint32_t* init, long long* cycles,
                                                        float* sink) {
#if defined(FP4MOE_SM90A)
  using L = Layout<NU, kWG>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  // Random bits (B kept to small finite bf16 values).
  for (int i = threadIdx.x; i < kRing * L::kSlot / 4; i += blockDim.x) {
    uint32_t v = init[i];
    const int in_slot = (i * 4) % L::kSlot;
    if (in_slot < L::kBBytes + L::kABytes) v = (v & 0x007F007Fu) | 0x3F003F00u;
    reinterpret_cast<uint32_t*>(smem_raw + (base - raw))[i] = v;
  }
  ptx::fence_proxy_async_shared();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const uint32_t low = sm80::decode_table(WeightMatrix{}), mul16 = 16u;
  const int t = lane % 4, s_off = sm80::scale_word_offset(g, t, kScaleBytes), s_byte = sm80::scale_word_byte(t, false);
  // Modes 7-12: the LDS table (lds_table_fill) at the first 64 KiB-aligned shared address past the
  // ring; lane_base = its address | lane * 4, so one PRMT makes a byte's entry address.
  constexpr bool kLds = MODE >= 7, kStored = MODE >= 10;
  constexpr int kBase = base_mode(MODE);
  uint32_t lane_base = 0;
  if constexpr (kLds) {
    const uint32_t table = (base + uint32_t(kRing * L::kSlot) + 0xFFFFu) & ~0xFFFFu;
    if (table + 0x10000u > raw + uint32_t(kLdsSmem)) {  // the allocation cannot hold it: say so
      if (threadIdx.x == 0) cycles[blockIdx.x * kWG] = -1;
      return;
    }
    lds_table_fill<kStored>(table);
    __syncthreads();
    lane_base = table | uint32_t(lane * 4);
  }
  float acc[1][NU][4];
  sm80::zero_acc<NU, true>(acc);
  auto slot_of = [&](int j) { return base + uint32_t((j % kRing) * L::kSlot); };
  auto load = [&](int j, uint4& wq, uint32_t& sp) {
    const uint32_t st = slot_of(j);
    const uint32_t w = st + uint32_t(L::kBBytes + L::kABytes);
    uint32_t ws;
    sm80::load_weight_frag(w + uint32_t(warp * kWordsBytes), w + uint32_t(L::kWarps * kWordsBytes + warp * kScaleBytes),
                           lane, s_off, wq, ws);
    sp = sm80::scale_rows_bf16x2(ws, s_byte, false, mul16);
  };
  auto decode_step = [&](uint32_t (&a)[4], const uint4& wq, uint32_t sp, int kk) {
    if constexpr (kLds)
      lds_weight_a_frag<kStored>(a, wq, sp, kk, lane_base);
    else
      sm80::weight_a_frag(a, wq, sp, kk, low);
#pragma unroll
    for (int r = 0; r < 4; ++r) ptx::reg_fence(a[r]);
  };
  auto decode = [&](uint32_t (&a)[4][4], int j) {
    uint4 wq;
    uint32_t ws;
    load(j, wq, ws);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) decode_step(a[kk], wq, ws, kk);
  };
  auto desc = [&](int j) { return ptx::wgmma_desc_kmajor_sw128(slot_of(j)); };
  auto mma = [&](uint32_t (&a)[4][4], int j) {
    const uint64_t d = desc(j);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) ptx::wgmma_m64k16_bf16_rs<NU>(acc[0], a[kk], d + uint64_t(2 * kk));
    ptx::wgmma_commit_group();
  };
  uint32_t a0[4][4], a1[4][4], a2[4][4];
  const bool mma_role = int(threadIdx.x / 128) < kWG / 2;
  __syncthreads();
  const long long t0 = clock64();
  if constexpr (kBase >= 5) {
    if (mma_role) {
      if constexpr (kBase == 5) {
        decode(a0, 0);
        decode(a1, 1);
      }
      auto group = [&](uint32_t (&a)[4][4], int j) {
        const uint64_t d = desc(j);
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          if constexpr (kBase == 5) {
            ptx::wgmma_m64k16_bf16_rs<NU>(acc[0], a[kk], d + uint64_t(2 * kk));
          } else if constexpr (NU == 8 || NU == 16) {
            const uint64_t da = ptx::wgmma_desc_kmajor_sw128(slot_of(j) + uint32_t(L::kBBytes));
            ptx::wgmma_m64k16_bf16_ss<NU>(acc[0], da + uint64_t(2 * kk), d + uint64_t(2 * kk));
          }
        }
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();
      };
      for (int j = 0; j < iters; j += 2) {
        group(a0, j);
        group(a1, j + 1);
      }
    } else {
      for (int j = 0; j < iters; j += 2) {
        decode(a0, j);
        decode(a1, j + 1);
      }
    }
  } else if constexpr (kBase == 0) {
    for (int j = 0; j < iters; j += 2) {
      decode(a0, j);
      decode(a1, j + 1);
    }
  } else if constexpr (kBase == 1) {
    decode(a0, 0);
    decode(a1, 1);
    for (int j = 0; j < iters; j += 2) {
      mma(a0, j);
      ptx::wgmma_wait_group<1>();
      mma(a1, j + 1);
      ptx::wgmma_wait_group<1>();
    }
  } else if constexpr (kBase == 2) {
    for (int j = 0; j < iters; j += 2) {
      decode(a0, j);
      mma(a0, j);
      ptx::wgmma_wait_group<1>();
      decode(a1, j + 1);
      mma(a1, j + 1);
      ptx::wgmma_wait_group<1>();
    }
  } else if constexpr (kBase == 3) {
    for (int j = 0; j < iters; j += 3) {
      decode(a0, j);
      mma(a0, j);
      ptx::wgmma_wait_group<2>();
      decode(a1, j + 1);
      mma(a1, j + 1);
      ptx::wgmma_wait_group<2>();
      decode(a2, j + 2);
      mma(a2, j + 2);
      ptx::wgmma_wait_group<2>();
    }
  } else {
    // k-block j's wgmma from set cur, k-block j + 1 decoded into set nxt between them; nxt was
    // read by group j - 2, complete after the wait_group 1 that ended k-block j - 1.
    auto step = [&](uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4], int j) {
      const uint64_t d = desc(j);
      uint4 wq;
      uint32_t ws;
      load(j + 1, wq, ws);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        ptx::wgmma_m64k16_bf16_rs<NU>(acc[0], cur[kk], d + uint64_t(2 * kk));
        decode_step(nxt[kk], wq, ws, kk);
      }
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<1>();
    };
    decode(a0, 0);
    for (int j = 0; j < iters; j += 3) {
      step(a0, a1, j);
      step(a1, a2, j + 1);
      step(a2, a0, j + 2);
    }
  }
  if constexpr (kBase != 0) ptx::wgmma_wait_group<0>();
  sm80::fence_acc(acc);
  const long long t1 = clock64();
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * kWG + threadIdx.x / 128] = t1 - t0;
  float s = 0.0f;
#pragma unroll
  for (int nt = 0; nt < NU; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) s += acc[0][nt][c];
  if (kBase == 0 || (kBase >= 5 && !mma_role)) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) s += __uint_as_float(a0[kk][r] ^ a1[kk][r]);
  }
  if (s == 1.2345f) sink[threadIdx.x] = s;  // keeps the sums (never true for these inputs)
#endif
}

template <int NU, int kWG, int MODE>
void run(int iters, const uint32_t* init, long long* cycles_d, float* sink, int sms) {
  using L = Layout<NU, kWG>;
  auto k = rs_probe<NU, kWG, MODE>;
  constexpr int kBase = base_mode(MODE);
  const int smem = MODE >= 7 ? kLdsSmem : L::kSmem;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  std::vector<long long> cyc(size_t(sms) * kWG);
  double best_cyc = 0, mma_cyc = 0, dec_cyc = 0;
  for (int rep = 0; rep < 5; ++rep) {
    CK(cudaEventRecord(e0));
    k<<<sms, kWG * 128, smem>>>(iters, init, cycles_d, sink);
    CK(cudaGetLastError());
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0 && ms < best) {
      best = ms;
      CK(cudaMemcpy(cyc.data(), cycles_d, cyc.size() * sizeof(long long), cudaMemcpyDeviceToHost));
      if (*std::min_element(cyc.begin(), cyc.end()) < 0) {
        std::printf("| %d | %d | %d | the table does not fit the allocation |\n", NU * 8, kWG, MODE);
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
        return;
      }
      double slowest = 0, role[2] = {0, 0};
      for (int b = 0; b < sms; ++b) {
        long long m = 0;
        for (int w = 0; w < kWG; ++w) {
          m = std::max(m, cyc[size_t(b) * kWG + w]);
          role[w < kWG / 2 ? 0 : 1] += double(cyc[size_t(b) * kWG + w]) / (sms * (kWG / 2 > 0 ? kWG / 2 : 1));
        }
        slowest += double(m) / sms;
      }
      best_cyc = slowest;
      mma_cyc = role[0];
      dec_cyc = role[1];
    }
  }
  const double mma = (kBase >= 5 ? kWG / 2 : kWG) * 4 * (NU * 8 / 64.0 * 32);
  const double per_kb = best_cyc / iters;
  char roles[64] = "";
  if (kBase >= 5) std::snprintf(roles, sizeof roles, "mma %.0f, decode %.0f", mma_cyc / iters, dec_cyc / iters);
  std::printf("| %d | %d | %d | %.1f | %.0f | %.0f | %.2f | %.2f | %s |\n", NU * 8, kWG, MODE, best * 1e3, per_kb, mma,
              mma / per_kb, best_cyc / (best * 1e-3) * 1e-9, roles);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
}

// run() of each mode in MODES, in that order.
template <int NU, int kWG, int... MODES>
void run_each(int iters, const uint32_t* init, long long* c, float* s, int sms) {
  (run<NU, kWG, MODES>(iters, init, c, s, sms), ...);
}
template <int NU, int kWG>
void run_modes(int iters, const uint32_t* init, long long* c, float* s, int sms) {
  run_each<NU, kWG, 0, 1, 2, 3, 4>(iters, init, c, s, sms);
  if constexpr (kWG >= 2) run<NU, kWG, 5>(iters, init, c, s, sms);
  if constexpr (kWG >= 2 && (NU == 8 || NU == 16)) run<NU, kWG, 6>(iters, init, c, s, sms);
}
// The table decode's rows (v92) beside the PRMT decode's: decode only, both, roles apart.
template <int NU, int kWG>
void run_lds_modes(int iters, const uint32_t* init, long long* c, float* s, int sms) {
  run_each<NU, kWG, 0, 8, 2, 7, 11, 10>(iters, init, c, s, sms);
  if constexpr (kWG >= 2) run_each<NU, kWG, 5, 9, 12>(iters, init, c, s, sms);
}


// Which resource the wgmma takes from the decode (v60): warpgroup 0 issues wgmma back to back
// (MMA 1: RS as mode 5, 2: SS as mode 6; 0: nothing), warpgroups 1 .. kAlu each run 8
// independent chains per thread of one instruction kind:
//   KIND 0 LOP3 with three register sources (x = (x & y) | z, y and z differ per chain)
//   KIND 2 PRMT with three register sources (the decode's table lookup)
//   KIND 3 HMUL2 with two register sources (the decode's scale multiply; FMA pipe)
//   KIND 4 one register source: LOP3 x ^ immediate and SHF x rotated by an immediate in turn
//          (ptxas folds a chain of either alone)
//   KIND 5 PRMT with two register sources and an immediate selector
//   KIND 6 one register source: LOP3 x ^ immediate and x + immediate (VIADD) in turn
//   KIND 7 FFMA, three register sources (fp32)
//   KIND 8 IMAD, three register sources
//   KIND 9 IADD3, three register sources
//   KIND 10 FMUL, two register sources (fp32)
//   KIND 11 LOP3 x ^ immediate and IMAD x * y in turn
//   KIND 12 F2FP: two fp32 packed into bf16x2 (cvt.rn.bf16x2.f32)
//   KIND 13 LOP3 x ^ immediate, then I2FP (u32 -> fp32): one of each a step
// (v61: whether the wgmma take the other warps' register-file reads or their issue: if kinds
// with fewer register sources keep more of their rate beside the wgmma, the reads.)
// (KIND 1, IADD3 x + constant, was folded by ptxas into one add per 8 in v60's run: removed.)
// Cycles per instruction per ALU warp, alone and beside the MMAs, and what a scheduler issues of
// them a cycle (kAlu warps each): with one warp a scheduler the chains' latency counts too; with
// three, a cut in throughput shows as such.
#if defined(FP4MOE_SM90A)
// Two fp32 (bits) rounded into one bf16x2 (a in the low half): one F2FP.
__device__ __forceinline__ uint32_t pack_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(__uint_as_float(b)), "f"(__uint_as_float(a)));
  return d;
}
#endif

template <int NU, int KIND, int MMA, int kAlu>
__global__ void __launch_bounds__(128 * (kAlu + 1), 1) alu_probe(int iters, const uint32_t* init, long long* cycles,
                                                                 float* sink) {
#if defined(FP4MOE_SM90A)
  using L = Layout<NU, 2>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  for (int i = threadIdx.x; i < kRing * L::kSlot / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem_raw + (base - raw))[i] = (init[i] & 0x007F007Fu) | 0x3F003F00u;
  ptx::fence_proxy_async_shared();
  __syncthreads();
  const long long t0 = clock64();
  float s = 0.0f;
  if (threadIdx.x < 128) {
    if constexpr (MMA > 0) {
      float acc[1][NU][4];
      sm80::zero_acc<NU, true>(acc);
      uint32_t a[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) a[kk][r] = init[threadIdx.x * 16 + kk * 4 + r] & 0x3F7F3F7Fu;
      // Longer than the ALU warps run: 4 k-blocks (512+ cycles) per ALU iteration (64
      // instructions, 2-5 cycles each). A fixed count: a wgmma loop left by a flag that the
      // warps read at different times would split the warpgroup (illegal instruction).
      for (int j = 0; j < iters * 4; ++j) {
        const uint32_t slot = base + uint32_t((j % kRing) * L::kSlot);
        const uint64_t d = ptx::wgmma_desc_kmajor_sw128(slot);
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          if constexpr (MMA == 1) {
            ptx::wgmma_m64k16_bf16_rs<NU>(acc[0], a[kk], d + uint64_t(2 * kk));
          } else if constexpr (NU == 8 || NU == 16) {
            const uint64_t da = ptx::wgmma_desc_kmajor_sw128(slot + uint32_t(L::kBBytes));
            ptx::wgmma_m64k16_bf16_ss<NU>(acc[0], da + uint64_t(2 * kk), d + uint64_t(2 * kk));
          }
        }
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();
      }
      ptx::wgmma_wait_group<0>();
      sm80::fence_acc(acc);
#pragma unroll
      for (int nt = 0; nt < NU; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) s += acc[0][nt][c];
    }
  } else {
    uint32_t x[8], y[8], z[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[i] = init[threadIdx.x * 24 + i];
      y[i] = init[threadIdx.x * 24 + 8 + i];
      z[i] = init[threadIdx.x * 24 + 16 + i];
    }
    for (int j = 0; j < iters; ++j) {
#pragma unroll
      for (int rep = 0; rep < 8; ++rep)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if constexpr (KIND == 0) x[i] = and_or(x[i], y[i], z[(i + rep) % 8]);
          else if constexpr (KIND == 2) x[i] = byte_perm(y[i], z[(i + rep) % 8], x[i]);
          else if constexpr (KIND == 3) x[i] = ptx::mul_bf16x2(x[i], y[(i + rep) % 8]);
          else if constexpr (KIND == 4)
            x[i] = rep % 2 ? __funnelshift_l(x[i], x[i], 3 + rep) : x[i] ^ (0x5A5A5A5Au + rep);
          else if constexpr (KIND == 5) x[i] = byte_perm(x[i], y[(i + rep) % 8], 0x5140u + rep);
          else if constexpr (KIND == 6)
            x[i] = rep % 2 ? x[i] + (0x9E3779B9u + rep) : x[i] ^ (0x5A5A5A5Au + rep);
          else if constexpr (KIND == 7)
            x[i] = __float_as_uint(
                fmaf(__uint_as_float(x[i]), __uint_as_float(y[i]), __uint_as_float(z[(i + rep) % 8])));
          else if constexpr (KIND == 8) x[i] = x[i] * y[i] + z[(i + rep) % 8];
          else if constexpr (KIND == 9) x[i] = x[i] + y[i] + z[(i + rep) % 8];
          else if constexpr (KIND == 10)
            x[i] = __float_as_uint(__uint_as_float(x[i]) * __uint_as_float(y[(i + rep) % 8]));
          else if constexpr (KIND == 11) x[i] = rep % 2 ? x[i] * y[i] : x[i] ^ (0x5A5A5A5Au + rep);
          else if constexpr (KIND == 12) x[i] = pack_bf16x2(x[i], y[(i + rep) % 8]);
          else x[i] = __float_as_uint(__uint2float_rn(x[i] ^ (0x5A5A5A5Au + rep)));
          ptx::reg_fence(x[i]);
        }
    }
    const long long t1 = clock64();
    if (threadIdx.x % 128 == 0) cycles[blockIdx.x * kAlu + threadIdx.x / 128 - 1] = t1 - t0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s += __uint_as_float(x[i]);
  }
  if (s == 1.2345f) sink[threadIdx.x] = s;
#endif
}

// Cycles per instruction per ALU warp: the mean over the CTAs of their slowest ALU warpgroup.
template <int NU, int KIND, int MMA, int kAlu>
double run_alu(int iters, const uint32_t* init, long long* cycles_d, float* sink, int sms) {
  using L = Layout<NU, 2>;
  auto k = alu_probe<NU, KIND, MMA, kAlu>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmem));
  std::vector<long long> cyc(size_t(sms) * kAlu);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    k<<<sms, 128 * (kAlu + 1), L::kSmem>>>(iters, init, cycles_d, sink);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(cyc.data(), cycles_d, cyc.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    double sum = 0;
    for (int b = 0; b < sms; ++b) sum += double(*std::max_element(&cyc[size_t(b) * kAlu], &cyc[size_t(b) * kAlu] + kAlu));
    if (rep > 0) best = std::min(best, sum / sms);
  }
  return best / (double(iters) * 64);
}

template <int NU, int KIND, int kAlu>
void run_alu_kind(int iters, const uint32_t* init, long long* c, float* s, int sms) {
  static const char* names[] = {"LOP3 3 regs",  "",           "PRMT 3 regs", "HMUL2 2 regs", "LOP3 / SHF 1 reg",
                                "PRMT 2 regs",  "LOP3 / VIADD 1 reg",       "FFMA 3 regs",  "IMAD 3 regs",
                                "IADD3 3 regs", "FMUL 2 regs", "LOP3 / IMAD", "F2FP pack",    "LOP3 + I2FP"};
  const double alone = run_alu<NU, KIND, 0, kAlu>(iters, init, c, s, sms);
  const double rs = run_alu<NU, KIND, 1, kAlu>(iters, init, c, s, sms);
  double ss = 0;
  if constexpr (NU == 8 || NU == 16) ss = run_alu<NU, KIND, 2, kAlu>(iters, init, c, s, sms);
  std::printf("| %d | %s | %d | %.2f | %.2f | %.2f | %.2f / %.2f / %.2f |\n", NU * 8, names[KIND], kAlu, alone, rs, ss,
              kAlu / alone, kAlu / rs, ss > 0 ? kAlu / ss : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) / 6 * 6 : 6000;  // a multiple of 2 and 3
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t words = 256 * 1024 / 4;
  std::vector<uint32_t> h(words);
  uint32_t x = 12345u;
  for (auto& v : h) v = (x = x * 1664525u + 1013904223u);
  uint32_t* init = nullptr;
  long long* cycles = nullptr;
  float* sink = nullptr;
  CK(cudaMalloc(&init, words * 4));
  CK(cudaMalloc(&cycles, sms * 4 * sizeof(long long)));
  CK(cudaMalloc(&sink, 1024 * sizeof(float)));
  CK(cudaMemcpy(init, h.data(), words * 4, cudaMemcpyHostToDevice));
  std::printf("iters %d k-blocks per warpgroup, %d CTAs\n", iters, sms);
  std::printf("| tokens | WGs | mode | us | cycles / k-block | MMA cycles | MMA share | GHz | roles (5, 6) |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  const bool alu_only = argc > 2 && std::strcmp(argv[2], "alu") == 0;  // the alu_probe rows alone
  if (argc > 2 && std::strcmp(argv[2], "lds") == 0) {  // the table decode's check and rows alone
    unsigned* bad = nullptr;
    CK(cudaMalloc(&bad, 3 * sizeof(unsigned)));
    CK(cudaMemset(bad, 0, 3 * sizeof(unsigned)));
    CK(cudaFuncSetAttribute(lds_check, cudaFuncAttributeMaxDynamicSharedMemorySize, kLdsSmem));
    lds_check<<<1, 256, kLdsSmem>>>(init, int(words), bad);
    CK(cudaGetLastError());
    unsigned hbad[3] = {0, 0, 0};
    CK(cudaMemcpy(hbad, bad, sizeof hbad, cudaMemcpyDeviceToHost));
    std::printf("table decodes against frag_decode_word: %u (byte layout) and %u (the kernels' layout) of %zu "
                "registers differ%s\n", hbad[0], hbad[1], words * 4, hbad[2] ? " (the table did not fit)" : "");
    CK(cudaFree(bad));
    run_lds_modes<6, 4>(iters, init, cycles, sink, sms);
    run_lds_modes<8, 4>(iters, init, cycles, sink, sms);
    run_lds_modes<16, 2>(iters, init, cycles, sink, sms);
    run_lds_modes<8, 2>(iters, init, cycles, sink, sms);
    return hbad[0] == 0 && hbad[1] == 0 && hbad[2] == 0 ? 0 : 1;
  }
  if (!alu_only) {
    run_modes<6, 4>(iters, init, cycles, sink, sms);
    run_modes<6, 2>(iters, init, cycles, sink, sms);
    run_modes<8, 4>(iters, init, cycles, sink, sms);
    run_modes<8, 2>(iters, init, cycles, sink, sms);
    run_modes<8, 1>(iters, init, cycles, sink, sms);
    run_modes<16, 2>(iters, init, cycles, sink, sms);
  }
  std::printf("\n| tokens | ALU kind | ALU warps a scheduler | cycles / instr alone | beside RS wgmma | beside SS | "
              "instr / cycle a scheduler: alone / RS / SS |\n|---|---|---|---|---|---|---|\n");
  run_alu_kind<8, 0, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 4, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 4, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 5, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 5, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<16, 4, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 6, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 6, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 7, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 8, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 9, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 10, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 11, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 12, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 13, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 2, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 3, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 0, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 2, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<8, 3, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<16, 0, 1>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<16, 0, 3>(iters / 4, init, cycles, sink, sms);
  run_alu_kind<6, 0, 3>(iters / 4, init, cycles, sink, sms);
  CK(cudaFree(init));
  CK(cudaFree(cycles));
  CK(cudaFree(sink));
  return 0;
}
