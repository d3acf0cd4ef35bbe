// The CUDA pipeline kernels against independent host oracles: routing (bit-exact ids
// vs detail::route_reference), permutation (an oracle written here), activation
// quantization (vs detail::nvfp4_quantize_rows), combine and batched writeback (the
// reference's loop written here). Fresh random inputs every run; the seed is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "cuda/gemm_internal.hpp"
#include "cuda/pipeline.hpp"
#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "reference/reference.hpp"

namespace fp4moe::testing {
namespace {

uint64_t fresh_seed() { return (uint64_t(std::random_device{}()) << 32) | std::random_device{}(); }

// ---------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------
struct RouteCase {
  const char* name;
  int64_t E, k;
  RoutingDesc r;
  bool bias;
};

std::vector<RouteCase> route_cases() {
  auto sm = [](bool renorm) {
    RoutingDesc r;
    r.method = RoutingMethod::softmax;
    r.renormalize = renorm;
    return r;
  };
  auto grouped = [](int g, int tg, float scale, bool renorm = true) {
    RoutingDesc r;
    r.method = RoutingMethod::sigmoid_grouped;
    r.n_group = g;
    r.topk_group = tg;
    r.routed_scaling_factor = scale;
    r.renormalize = renorm;
    return r;
  };
  return {
      {"qwen3_softmax_renorm", 128, 8, sm(true), false},
      {"softmax_no_renorm", 64, 4, sm(false), false},
      {"gpt_oss_softmax", 128, 4, sm(true), false},
      {"deepseek_v3_grouped_bias", 256, 8, grouped(8, 4, 2.5f), true},
      {"kimi_k2_one_group_bias", 384, 8, grouped(1, 1, 2.827f), true},
      {"grouped_no_bias_no_renorm", 64, 6, grouped(4, 2, 1.0f, false), false},
      {"grouped_one_expert_groups", 16, 2, grouped(16, 3, 1.5f), true},
      {"softmax_k1_odd_E", 37, 1, sm(true), false},
      // the register kernel at each of its widths' edges (E <= 32 NPL, NPL 4 / 8 / 12 / 16)
      // and at k = 32; past its limits (E > 512, k > 32, n_group > 32) the shared-memory kernel
      {"softmax_E129_k32", 129, 32, sm(true), false},
      {"grouped_E256_two_groups", 256, 8, grouped(2, 1, 1.0f), true},
      {"softmax_E352_no_renorm", 352, 5, sm(false), false},
      {"grouped_E512_32_groups", 512, 16, grouped(32, 5, 2.0f), true},
      {"softmax_E600_shared", 600, 8, sm(true), false},
      {"softmax_k33_shared", 64, 33, sm(true), false},
      {"grouped_64_groups_shared", 128, 6, grouped(64, 5, 1.0f), true},
  };
}

// Logits: normal, then rows that force ties (values on a coarse grid, a constant row,
// repeated maxima), -inf entries, and NaN (first and elsewhere).
std::vector<float> make_logits(int64_t T, int64_t E, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> v(size_t(T * E));
  for (auto& x : v) x = nd(rng);
  for (int64_t t = 0; t < T; ++t) {
    float* row = v.data() + t * E;
    switch (t % 7) {
      case 1:  // coarse grid: many exact ties
        for (int64_t e = 0; e < E; ++e) row[e] = std::round(row[e] * 2.0f) / 2.0f;
        break;
      case 2:  // constant row
        for (int64_t e = 0; e < E; ++e) row[e] = 0.25f;
        break;
      case 3:  // the maximum repeated at scattered indices
        for (int64_t e = E - 1; e >= 0; e -= 3) row[e] = 9.0f;
        break;
      case 4:
        row[t % E] = -INFINITY;
        break;
      case 5:
        if (t % 2) row[0] = NAN; else row[E / 2] = NAN;
        break;
      default: break;
    }
  }
  return v;
}

TEST(CudaRouting, IdsAndWeightsBitExactAgainstReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const RouteCase& rc : route_cases()) {
    for (int64_t T : {int64_t(1), int64_t(7), int64_t(300)}) {
      SCOPED_TRACE(std::string(rc.name) + " T=" + std::to_string(T));
      const int64_t E = rc.E, k = rc.k;
      std::vector<float> logits = make_logits(T, E, rng);
      std::vector<float> bias(static_cast<size_t>(E));
      std::uniform_real_distribution<float> ud(-0.1f, 0.1f);
      for (int64_t e = 0; e < E; ++e) bias[e] = (e % 5 == 0) ? 0.0f : ud(rng);  // some equal biases

      // reference on the host
      std::vector<int32_t> ref_ids(size_t(T * k));
      std::vector<float> ref_w(size_t(T * k));
      RouteArgs h;
      h.router_logits = TensorView::of(logits.data(), DType::f32, {T, E});
      if (rc.bias) h.correction_bias = TensorView::of(bias.data(), DType::f32, {E});
      h.topk_ids = TensorView::of(ref_ids.data(), DType::i32, {T, k});
      h.topk_weights = TensorView::of(ref_w.data(), DType::f32, {T, k});
      h.top_k = k;
      h.routing = rc.r;
      detail::route_reference(h);

      // the GPU through the public entry
      DeviceBuffer d_logits(logits), d_bias(bias), d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4);
      RouteArgs g = h;
      g.router_logits = d_logits.view(DType::f32, {T, E});
      g.correction_bias = rc.bias ? d_bias.view(DType::f32, {E}) : TensorView{};
      g.topk_ids = d_ids.view(DType::i32, {T, k});
      g.topk_weights = d_w.view(DType::f32, {T, k});
      route(g);
      const auto ids = d_ids.download<int32_t>();
      const auto w = d_w.download<float>();
      // Ids and weights bit for bit (any NaN for a NaN): the kernels take the reference's
      // steps in its order.
      int bad = 0;
      for (int64_t i = 0; i < T * k && bad < 5; ++i) {
        const bool both_nan = std::isnan(w[i]) && std::isnan(ref_w[i]);
        const bool w_ok = both_nan || std::memcmp(&w[i], &ref_w[i], 4) == 0;
        if (ids[i] != ref_ids[i] || !w_ok) {
          ++bad;
          ADD_FAILURE() << "token " << i / k << " slot " << i % k << ": gpu id " << ids[i] << " w " << w[i]
                        << ", reference id " << ref_ids[i] << " w " << ref_w[i];
        }
      }
      EXPECT_EQ(d_ids.guard_damage(), "");
      EXPECT_EQ(d_w.guard_damage(), "");
    }
  }
}

// ---------------------------------------------------------------------------
// Permutation
// ---------------------------------------------------------------------------
struct PermOracle {
  std::vector<int32_t> begin, count, row_token, slot_row;
  bool bad = false;
};

// Experts in index order, slots of one expert in slot order.
PermOracle permute_oracle(const std::vector<int32_t>& ids, const std::vector<int32_t>& map, int64_t T, int64_t k,
                          int64_t E, int64_t L) {
  PermOracle o;
  const int64_t N = T * k;
  std::vector<int32_t> local(size_t(N), -1);
  for (int64_t s = 0; s < N; ++s) {
    const int32_t id = ids[s];
    if (id == -1) continue;
    if (id < -1 || id >= E) {
      o.bad = true;
      continue;
    }
    local[s] = map[id];
  }
  o.begin.assign(size_t(L), 0);
  o.count.assign(size_t(L), 0);
  o.slot_row.assign(size_t(N), -1);
  int32_t pos = 0;
  for (int64_t e = 0; e < L; ++e) {
    o.begin[e] = pos;
    for (int64_t s = 0; s < N; ++s)
      if (local[s] == e) {
        o.row_token.push_back(int32_t(s / k));
        o.slot_row[s] = pos++;
      }
    o.count[e] = pos - o.begin[e];
  }
  return o;
}

template <class T>
void expect_same(const char* what, const std::vector<T>& got, const std::vector<T>& want, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << ", oracle " << want[i] << " (first mismatch)";
      return;
    }
}

TEST(CudaPermute, MatchesOracleBitExact) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  enum Kind { uniform, with_minus_one, non_local, one_expert, bad_ids };
  const char* kind_name[] = {"uniform", "with_minus_one", "non_local", "one_expert", "bad_ids"};
  // Each path where it applies, under three settings of the bounds (fused / block slots), at
  // T*k = 8, 56, 256, 264, 2400, 8192, 8200, 131072 and E = 64, 384, 3000, 12000 (non_local: 2/3):
  //   default (32 / 4096): fused at 8; block at 56 and 256 (1 to 8 warps; 12000 experts: 1), 264
  //     (9 warps; 3000 experts: 4) and 2400 (32 warps; 384 experts: 31); chunked where the
  //     counters leave a warp more than 8 steps (12000 experts at 264, 3000 at 2400) and from
  //     8192: chunks of 1 (3000 experts: 2, 12000: 1) to 8 warps, to 128 chunks (131072);
  //   fused to 256, no block kernel (256 / 0): fused at 56 and 256, one partial chunk at 264 and
  //     2400;
  //   block to 8192 (32 / 8192): 8192 slots on 32 warps of 8 steps (64 experts).
  struct Bounds {
    const char* name;
    int64_t fused, block;
  };
  const Bounds settings[] = {
      {"default bounds", -1, -1}, {"fused to 256, no block kernel", 256, 0}, {"block to 8192", -1, 8192}};
  struct Restore {
    ~Restore() { cuda::set_permute_bounds(-1, -1); }
  } restore;
  for (const Bounds& b : settings) {
    for (int64_t T : {int64_t(1), int64_t(7), int64_t(32), int64_t(33), int64_t(300), int64_t(1024), int64_t(1025),
                      int64_t(16384)}) {
      for (int64_t E : {int64_t(64), int64_t(384), int64_t(3000), int64_t(12000)}) {
        if (E > 384 && T >= 1024) continue;                     // the oracle walks E x T*k
        if (b.block == 0 && (T == 1 || T >= 1024)) continue;    // the same paths as by default
        if (b.block == 8192 && T != 1024) continue;             // the same paths as by default
        for (int kind = uniform; kind <= bad_ids; ++kind) {
          const int64_t k = 8;
          SCOPED_TRACE("T=" + std::to_string(T) + " E=" + std::to_string(E) + " " + kind_name[kind] + ", " + b.name);
          // map: identity, or every third expert non-local (and the rest shuffled)
          std::vector<int32_t> map(static_cast<size_t>(E));
          int64_t L = E;
          if (kind == non_local) {
            L = 0;
            for (int64_t e = 0; e < E; ++e) map[e] = (e % 3 == 1) ? -1 : int32_t(L++);
            std::vector<int32_t> perm(static_cast<size_t>(L));
            for (int64_t i = 0; i < L; ++i) perm[i] = int32_t(i);
            std::shuffle(perm.begin(), perm.end(), rng);
            for (auto& m : map)
              if (m >= 0) m = perm[m];
          } else {
            for (int64_t e = 0; e < E; ++e) map[e] = int32_t(e);
          }
          std::vector<int32_t> ids(size_t(T * k));
          std::uniform_int_distribution<int32_t> pick(0, int32_t(E - 1));
          for (int64_t s = 0; s < T * k; ++s) {
            ids[s] = kind == one_expert ? 5 : pick(rng);
            if (kind == with_minus_one && s % 3 == 0) ids[s] = -1;
            if (kind == bad_ids && s % 97 == 3) ids[s] = (s % 2) ? int32_t(E + s % 7) : -2 - int32_t(s % 5);
          }
          const PermOracle o = permute_oracle(ids, map, T, k, E, L);
          const int64_t N = T * k;
          DeviceBuffer d_ids(ids), d_map(map), status(4, 0x5A), begin(size_t(L) * 4), count(size_t(L) * 4),
              row_token(size_t(N) * 4), slot_row(size_t(N) * 4),
              scratch(size_t(cuda::permute_scratch_ints(N, L)) * 4);
          cuda::PermuteArgs a;
          a.topk_ids = d_ids.as<int32_t>();
          a.expert_map = d_map.as<int32_t>();
          a.T = T;
          a.k = k;
          a.E = E;
          a.num_local = L;
          a.status = status.as<uint32_t>();
          a.begin = begin.as<int32_t>();
          a.count = count.as<int32_t>();
          a.row_token = row_token.as<int32_t>();
          a.slot_row = slot_row.as<int32_t>();
          a.scratch = scratch.as<int32_t>();
          cuda::set_permute_bounds(b.fused, b.block);
          const cuda::PermutePath path = cuda::permute_path(N, L);
          const char* path_name[] = {"fused", "block", "chunked"};
          SCOPED_TRACE(std::string("path ") + path_name[int(path)]);
          cuda::permute(a, nullptr);
          TEST_CUDA(cudaDeviceSynchronize());
          expect_same("begin", begin.download<int32_t>(), o.begin, size_t(L));
          expect_same("count", count.download<int32_t>(), o.count, size_t(L));
          const auto rt = row_token.download<int32_t>();
          expect_same("row_token", rt, o.row_token, o.row_token.size());
          for (size_t p = o.row_token.size(); p < size_t(N); ++p)
            if (rt[p] != -1) {  // 0xFF poison = -1: positions past sum(count) are not written
              ADD_FAILURE() << "row_token[" << p << "] written past the routed rows: " << rt[p];
              break;
            }
          expect_same("slot_row", slot_row.download<int32_t>(), o.slot_row, size_t(N));
          // status starts poisoned: permute zeroes it (a one-kernel path or the memset), then ORs the bits
          EXPECT_EQ(status.download<uint32_t>()[0], o.bad ? cuda::kStatusBadId : 0u);
          // the one-kernel paths leave the chunk scratch as it was (its poison)
          if (path != cuda::PermutePath::chunked)
            for (int32_t v : scratch.download<int32_t>())
              if (v != -1) {
                ADD_FAILURE() << "scratch written by the " << path_name[int(path)] << " path: " << v;
                break;
              }
          for (const DeviceBuffer* d : {&status, &begin, &count, &row_token, &slot_row, &scratch})
            EXPECT_EQ(d->guard_damage(), "");
        }
      }
    }
  }
}

// The work split of the chunked path (host arithmetic, no GPU): every slot in exactly one
// warp's range, at most kPermuteMaxChunks chunks, the per-warp counters within 48 KiB, the
// scratch one int per (chunk, expert), none when one warp does it all.
TEST(CudaPermute, WorkSplitCoversEverySlot) {
  for (int64_t L : {int64_t(1), int64_t(64), int64_t(384), int64_t(1025), int64_t(3000), int64_t(12000)}) {
    for (int64_t N : {int64_t(1), int64_t(256), int64_t(257), int64_t(1024), int64_t(1025), int64_t(131072),
                      int64_t(131073), int64_t(1) << 24}) {
      SCOPED_TRACE("L=" + std::to_string(L) + " N=" + std::to_string(N));
      const int64_t w = cuda::permute_warps(L), ws = cuda::permute_warp_slots(N, L), c = cuda::permute_chunks(N, L);
      EXPECT_GE(w, 1);
      EXPECT_LE(w, 8);
      EXPECT_LE(w * L * 4, 48 * 1024);
      EXPECT_EQ(ws % 32, 0);
      EXPECT_GE(ws, cuda::kPermuteMinWarpSlots);
      EXPECT_LE(c, cuda::kPermuteMaxChunks);
      EXPECT_GE(c * w * ws, N);        // the last warp's range ends at or past N
      EXPECT_LT((c - 1) * w * ws, N);  // and no chunk starts past it
      EXPECT_EQ(cuda::permute_scratch_ints(N, L), N > cuda::kPermuteFusedSlots ? c * L : 0);
    }
  }
}

// The block kernel's split and the path rule (host arithmetic, no GPU): the block kernel's
// warps cover every slot in at most kPermuteBlockMaxSteps steps each, with their counters in
// kPermuteBlockSmem; under any bounds the chunked path runs only where the workspace holds its
// scratch (above kPermuteFusedSlots slots), the block kernel only where its split exists and
// the fused one only up to kPermuteFusedSlots slots.
TEST(CudaPermute, BlockSplitAndPathRule) {
  struct Restore {
    ~Restore() { cuda::set_permute_bounds(-1, -1); }
  } restore;
  const int64_t bounds[][2] = {{-1, -1}, {256, 0}, {-1, 8192}, {0, 0}, {0, int64_t(1) << 30}, {1000, 100}};
  int64_t blocks = 0, chunked = 0, fused = 0;
  for (const auto& bd : bounds) {
    cuda::set_permute_bounds(bd[0], bd[1]);
    EXPECT_EQ(cuda::permute_fused_slots(), bd[0] < 0 ? cuda::kPermuteFusedDefault
                                                     : std::min(bd[0], cuda::kPermuteFusedSlots));
    EXPECT_EQ(cuda::permute_block_slots(), bd[1] < 0 ? cuda::kPermuteBlockSlots : bd[1]);
    for (int64_t L : {int64_t(1), int64_t(64), int64_t(128), int64_t(384), int64_t(1025), int64_t(3000),
                      int64_t(12000)}) {
      for (int64_t N : {int64_t(1), int64_t(32), int64_t(33), int64_t(256), int64_t(257), int64_t(1024),
                        int64_t(2400), int64_t(4096), int64_t(8192), int64_t(8193), int64_t(131072)}) {
        SCOPED_TRACE("bounds " + std::to_string(bd[0]) + " / " + std::to_string(bd[1]) + " L=" + std::to_string(L) +
                     " N=" + std::to_string(N));
        const int64_t w = cuda::permute_block_warps(N, L);
        if (w > 0) {
          const int64_t ws = cuda::permute_block_warp_slots(N, w);
          EXPECT_LE(w, cuda::kPermuteBlockMaxWarps);
          EXPECT_LE((w * L + 32) * 4, cuda::kPermuteBlockSmem);
          EXPECT_EQ(ws % 32, 0);
          EXPECT_GE(ws, 32);
          EXPECT_LE(ws / 32, cuda::kPermuteBlockMaxSteps);
          EXPECT_GE(w * ws, N);  // the last warp's range ends at or past N
        }
        const cuda::PermutePath path = cuda::permute_path(N, L);
        switch (path) {
          case cuda::PermutePath::fused:
            ++fused;
            EXPECT_LE(N, cuda::kPermuteFusedSlots);
            break;
          case cuda::PermutePath::block:
            ++blocks;
            EXPECT_GT(w, 0);
            EXPECT_LE(N, cuda::permute_block_slots());
            EXPECT_GT(N, cuda::permute_fused_slots());
            break;
          case cuda::PermutePath::chunked:
            ++chunked;
            EXPECT_GT(N, cuda::kPermuteFusedSlots);
            EXPECT_GT(cuda::permute_scratch_ints(N, L), 0);
            break;
        }
        EXPECT_EQ(cuda::permute_one_kernel(N, L), path != cuda::PermutePath::chunked);
      }
    }
  }
  // every path was taken (the bounds above are not all one rule)
  EXPECT_GT(fused, 0);
  EXPECT_GT(blocks, 0);
  EXPECT_GT(chunked, 0);
  // the default bounds: decode on the fused kernel (T = 1, top-8), the table's mid sizes on the
  // block kernel (qwen3 T = 8 / 32 / 128, kimi-k2 T = 512), qwen3 T = 1024 on the chunks
  cuda::set_permute_bounds(-1, -1);
  EXPECT_EQ(cuda::permute_path(8, 384), cuda::PermutePath::fused);
  EXPECT_EQ(cuda::permute_path(64, 128), cuda::PermutePath::block);
  EXPECT_EQ(cuda::permute_path(256, 128), cuda::PermutePath::block);
  EXPECT_EQ(cuda::permute_path(1024, 128), cuda::PermutePath::block);
  EXPECT_EQ(cuda::permute_path(4096, 384), cuda::PermutePath::block);
  EXPECT_EQ(cuda::permute_path(8192, 128), cuda::PermutePath::chunked);
  EXPECT_EQ(cuda::permute_path(131072, 128), cuda::PermutePath::chunked);
}

// Row positions are int32: a row space past it, or more local experts than the counters
// hold, is refused with a message naming the argument, before any pointer is touched.
TEST(CudaPermute, RefusesWhatItCannotIndex) {
  auto message = [](int64_t T, int64_t k, int64_t L) -> std::string {
    cuda::PermuteArgs a;
    a.T = T;
    a.k = k;
    a.E = L;
    a.num_local = L;
    try {
      cuda::permute(a, nullptr);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(int64_t(1) << 28, 8, 64).find("tokens * top_k: got 2147483648"), std::string::npos);
  EXPECT_NE(message(16, 8, 12001).find("num_local_experts: got 12001"), std::string::npos);
}

TEST(CudaPermute, BatchedCountsClampedAndFlagged) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const int64_t L = 5, M = 10;
  const std::vector<int32_t> n = {0, 10, 3, 11, -2};
  DeviceBuffer d_n(n), status(4, 0), begin(L * 4), count(L * 4);
  cuda::batched_rows(d_n.as<int32_t>(), L, M, status.as<uint32_t>(), begin.as<int32_t>(), count.as<int32_t>(),
                     nullptr);
  EXPECT_EQ(begin.download<int32_t>(), (std::vector<int32_t>{0, 10, 20, 30, 40}));
  EXPECT_EQ(count.download<int32_t>(), (std::vector<int32_t>{0, 10, 3, 10, 0}));
  EXPECT_EQ(status.download<uint32_t>()[0], cuda::kStatusCountOverM | cuda::kStatusCountNegative);
}

// ---------------------------------------------------------------------------
// Activation quantization
// ---------------------------------------------------------------------------
// rows of K: normal values, with whole-zero blocks, tiny blocks (subnormal e4m3 scales
// for gs = 1) and blocks with one large outlier.
std::vector<float> make_rows(int64_t rows, int64_t K, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * K));
  for (auto& v : x) v = nd(rng);
  for (int64_t b = 0; b < rows * K / 16; ++b) {
    float* p = x.data() + b * 16;
    switch (b % 5) {
      case 1:
        for (int i = 0; i < 16; ++i) p[i] = 0.0f;
        break;
      case 2:
        for (int i = 0; i < 16; ++i) p[i] *= 1e-3f;
        break;
      case 3:
        p[b % 16] = 300.0f;
        break;
      default: break;
    }
  }
  return x;
}

// x as the given dtype's bytes, and the fp32 values those bytes hold.
std::vector<uint8_t> as_dtype(const std::vector<float>& x, DType dt, std::vector<float>& exact) {
  std::vector<uint8_t> b(x.size() * dtype_size(dt));
  exact.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    detail::write_activation(b.data(), dt, int64_t(i), x[i]);
    exact[i] = detail::read_activation(b.data(), dt, int64_t(i));
  }
  return b;
}

TEST(CudaQuantize, PlainRowsBitExactWithCpu) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t rows = 37, K = 7168 / 4 + 16;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (float gs : {1.0f, 448.0f * 6.0f / 7.5f, 1.0f / 3.0f}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " gs=" + std::to_string(gs));
      std::vector<float> exact;
      const auto bytes = as_dtype(make_rows(rows, K, rng), dt, exact);
      std::vector<uint8_t> want_d(size_t(rows * K / 2)), want_s(size_t(rows * K / 16));
      detail::nvfp4_quantize_rows(exact.data(), rows, K, gs, want_d.data(), want_s.data());
      DeviceBuffer x(bytes), d(want_d.size()), s(want_s.size());
      cuda::quantize_nvfp4_rows(x.data(), dt, rows, K, gs, d.as<uint8_t>(), s.as<uint8_t>(), nullptr);
      expect_same("data", d.download<uint8_t>(), want_d, want_d.size());
      expect_same("scale", s.download<uint8_t>(), want_s, want_s.size());
      EXPECT_EQ(d.guard_damage(), "");
      EXPECT_EQ(s.guard_damage(), "");
    }
  }
}

// The layer's preparation: round to bf16, times the row weight (rounded again), then
// NVFP4, its values as bf16 (e2m1 * e4m3, the host's nvfp4_value_bf16 of the oracle's bytes),
// or bf16; batched rows past their group's count untouched.
TEST(CudaQuantize, LayerActivationsMatchHostOracle) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t G = 3, M = 9, rows = G * M, K = 256;
  const std::vector<int32_t> counts = {9, 0, 4};
  std::uniform_real_distribution<float> ud(0.05f, 1.0f);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (bool weighted : {false, true}) {
      for (bool batched : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (weighted ? " weighted" : "") + (batched ? " batched" : ""));
        std::vector<float> exact;
        const auto bytes = as_dtype(make_rows(rows, K, rng), dt, exact);
        std::vector<float> w(static_cast<size_t>(rows));
        for (auto& v : w) v = ud(rng);
        std::vector<float> prepared(exact.size());
        std::vector<char> live(size_t(rows), 1);
        for (int64_t r = 0; r < rows; ++r) {
          if (batched) live[r] = (r % M) < counts[r / M];
          for (int64_t i = 0; i < K; ++i) {
            float v = round_bf16(exact[r * K + i]);
            if (weighted) v = round_bf16(v * w[r]);
            prepared[r * K + i] = v;
          }
        }
        const float gs = 1.0f / 0.0123f;
        std::vector<uint8_t> want_d(size_t(rows * K / 2)), want_s(size_t(rows * K / 16));
        detail::nvfp4_quantize_rows(prepared.data(), rows, K, gs, want_d.data(), want_s.data());

        DeviceBuffer x(bytes), d_w(w), d_counts(counts), d(want_d.size()), s(want_s.size()), b16(size_t(rows * K) * 2),
            vals(size_t(rows * K) * 2);
        cuda::ActRows src;
        src.x = x.data();
        src.dtype = dt;
        src.rows = rows;
        src.K = K;
        src.row_stride = K;
        if (weighted) src.row_weight = d_w.as<float>();
        if (batched) {
          src.group_count = d_counts.as<int32_t>();
          src.M = M;
        }
        cuda::act_to_nvfp4(src, gs, d.as<uint8_t>(), s.as<uint8_t>(), nullptr);
        cuda::act_to_bf16(src, b16.as<uint16_t>(), nullptr);
        cuda::act_to_nvfp4_values(src, gs, vals.as<uint16_t>(), nullptr);
        const auto got_d = d.download<uint8_t>();
        const auto got_v = vals.download<uint16_t>();
        const auto got_s = s.download<uint8_t>();
        const auto got_b = b16.download<uint16_t>();
        int bad = 0;
        for (int64_t r = 0; r < rows && bad < 3; ++r) {
          const bool ok_d = live[r] ? std::memcmp(&got_d[r * K / 2], &want_d[r * K / 2], K / 2) == 0
                                    : std::all_of(&got_d[r * K / 2], &got_d[r * K / 2] + K / 2,
                                                  [](uint8_t v) { return v == 0xFF; });
          const bool ok_s = live[r] ? std::memcmp(&got_s[r * K / 16], &want_s[r * K / 16], K / 16) == 0
                                    : std::all_of(&got_s[r * K / 16], &got_s[r * K / 16] + K / 16,
                                                  [](uint8_t v) { return v == 0xFF; });
          bool ok_b = true, ok_v = true;
          for (int64_t i = 0; i < K; ++i) {
            ok_b = ok_b && got_b[r * K + i] == (live[r] ? bf16_from_f32(prepared[r * K + i]) : uint16_t(0xFFFF));
            const uint8_t code = unpack_e2m1(want_d[size_t((r * K + i) / 2)], int(i % 2));
            const uint16_t value = cuda::nvfp4_value_bf16(code, e4m3_to_f32(want_s[size_t((r * K + i) / 16)]));
            ok_v = ok_v && got_v[r * K + i] == (live[r] ? value : uint16_t(0xFFFF));
          }
          if (!ok_d || !ok_s || !ok_b || !ok_v) {
            ++bad;
            ADD_FAILURE() << "row " << r << (live[r] ? "" : " (past its count: must stay poison)")
                          << (ok_d ? "" : " nvfp4 data differs") << (ok_s ? "" : " scales differ")
                          << (ok_b ? "" : " bf16 differs") << (ok_v ? "" : " nvfp4 values differ");
          }
        }
        for (const DeviceBuffer* b : {&d, &s, &b16, &vals}) EXPECT_EQ(b->guard_damage(), "");
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Staging (nvfp4_staging.cu): GEMM 1's bf16 h requantized to NVFP4 on the experts' rows only
// ---------------------------------------------------------------------------
// The host's requantization of one 16-block of h, as epilogue_gemm1 does it: amax the largest
// |h| over the non-NaN elements (NaN only when all 16 are), the scale code, then each code by
// e2m1_from_f32 and each value by nvfp4_value_bf16 of that code (not e2m1_round_f32, which the
// values kernel uses).
uint8_t host_requant_block(const uint16_t* h, float gs, uint8_t (&codes)[16], uint16_t (&values)[16]) {
  float amax = std::numeric_limits<float>::quiet_NaN();
  for (int j = 0; j < 16; ++j) {
    const float a = std::fabs(bf16_to_f32(h[j]));
    if (!std::isnan(a)) amax = std::isnan(amax) ? a : std::max(amax, a);
  }
  const uint8_t sc = nvfp4_scale_code(amax, gs);
  const float inv = nvfp4_inv_scale(sc, gs), s = e4m3_to_f32(sc);
  for (int j = 0; j < 16; ++j) {
    codes[j] = e2m1_from_f32(bf16_to_f32(h[j]) * inv);
    values[j] = cuda::nvfp4_value_bf16(codes[j], s);
  }
  return sc;
}

// Both requantizing staging kernels against the host, bit for bit, over expert layouts that
// take the row search's one, two and three narrowing steps (1, 33, 128, 300, 1100 experts,
// empty ones among them), rows of no expert between the experts' (left as they were), a K
// whose rows end inside a warp's run, and h with NaN (either sign), infinities, zeros of
// either sign, subnormals, huge values, all-NaN and all-zero blocks.
TEST(CudaStaging, RequantizesExpertRowsBitExact) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const uint16_t specials[] = {0x7FC0, 0xFFC0, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x8005, 0x7F7F, 0xFF00};
  for (int E : {1, 33, 128, 300, 1100}) {
    for (int64_t K : {16, 784}) {
      SCOPED_TRACE("E " + std::to_string(E) + " K " + std::to_string(K));
      std::vector<int32_t> begin(static_cast<size_t>(E)), count(static_cast<size_t>(E));
      int64_t row = 0;
      for (int e = 0; e < E; ++e) {
        row += int64_t(rng() % 3);  // rows of no expert between the experts'
        begin[size_t(e)] = int32_t(row);
        count[size_t(e)] = rng() % 4 == 0 ? 0 : int32_t(rng() % 5);
        row += count[size_t(e)];
      }
      const int64_t space = row + 2, rows_bound = space;
      std::vector<uint16_t> h(size_t(space * K));
      for (size_t i = 0; i < h.size(); ++i) {
        const uint64_t pick = rng() % 64;
        h[i] = pick < 3 ? specials[rng() % 10] : bf16_from_f32(nd(rng) * std::ldexp(1.0f, int(rng() % 24) - 12));
      }
      for (int64_t b = 0; b < space * K / 16; b += 7) {  // whole blocks of NaN or of zeros
        const uint16_t v = b % 2 ? uint16_t(0x7FC0) : uint16_t(0x8000);
        if (b % 5 == 0) std::fill(&h[size_t(b * 16)], &h[size_t(b * 16 + 16)], v);
      }
      std::vector<char> live(size_t(space), 0);
      for (int e = 0; e < E; ++e)
        for (int32_t q = 0; q < count[size_t(e)]; ++q) live[size_t(begin[size_t(e)] + q)] = 1;
      // The kernels take h as GEMM 1 writes it: k-permuted rows of Kp (cuda/gemm.hpp KOrder, zeros
      // past K), and write the codes so; the checks below read them back in logical order.
      const int64_t Kp = cuda::kperm_row(K);
      std::vector<uint16_t> hp(size_t(space * Kp), 0);
      for (int64_t r = 0; r < space; ++r)
        for (int64_t k = 0; k < K; ++k) hp[size_t(r * Kp + cuda::kperm_index(k))] = h[size_t(r * K + k)];
      for (float gs : {1.0f / 0.0123f, 448.0f * 6.0f / 7.5f}) {
        SCOPED_TRACE("gs " + std::to_string(gs));
        DeviceBuffer d_begin(begin), d_count(count), d_h(hp), d_fp4(size_t(space * Kp / 2)), d_sc(size_t(space * K / 16));
        cuda::ExpertRows er;
        er.begin = d_begin.as<int32_t>();
        er.count = d_count.as<int32_t>();
        er.rows_bound = rows_bound;
        er.row_space = space;
        cuda::stage_bf16_to_nvfp4(d_h.as<uint16_t>(), K, er, E, gs, d_fp4.as<uint8_t>(), d_sc.as<uint8_t>(), nullptr);
        cuda::stage_bf16_to_nvfp4_values(d_h.as<uint16_t>(), K, er, E, gs, nullptr);
        TEST_CUDA(cudaDeviceSynchronize());
        const auto got_hp = d_h.download<uint16_t>();
        const auto got_dp = d_fp4.download<uint8_t>();
        const auto got_s = d_sc.download<uint8_t>();
        // logical views; the padding: values as they were (0), codes 0 on an expert's row
        std::vector<uint16_t> got_h(size_t(space * K));
        std::vector<uint8_t> got_d(size_t(space * K / 2));
        for (int64_t r = 0; r < space; ++r) {
          for (int64_t k = 0; k < K; ++k) got_h[size_t(r * K + k)] = got_hp[size_t(r * Kp + cuda::kperm_index(k))];
          for (int64_t k = 0; k < K; k += 2)
            got_d[size_t((r * K + k) / 2)] = got_dp[size_t((r * Kp + cuda::kperm_index(k)) / 2)];
          for (int64_t k = K; k < Kp; k += 2) {
            EXPECT_EQ(got_hp[size_t(r * Kp + cuda::kperm_index(k))], 0u) << "row " << r << " padding k " << k;
            EXPECT_EQ(got_dp[size_t((r * Kp + cuda::kperm_index(k)) / 2)], live[size_t(r)] ? 0u : 0xFFu)
                << "row " << r << " padding k " << k;
          }
        }
        int bad = 0;
        for (int64_t r = 0; r < space && bad < 3; ++r) {
          bool ok_v = true, ok_d = true, ok_s = true;
          for (int64_t b = 0; b < K / 16; ++b) {
            const size_t at = size_t(r * K + b * 16);
            uint8_t codes[16];
            uint16_t values[16];
            const uint8_t sc = host_requant_block(&h[at], gs, codes, values);
            for (int j = 0; j < 16; ++j) {
              const uint16_t want = live[size_t(r)] ? values[j] : h[at + size_t(j)], got = got_h[at + size_t(j)];
              // A block of 16 NaN has a NaN scale and NaN values: the device's fp32 NaN is the
              // canonical one, the host's keeps an operand's payload (v61's first run)
              ok_v = ok_v && (got == want || (live[size_t(r)] && sc == 0x7F && std::isnan(bf16_to_f32(got)) &&
                                                std::isnan(bf16_to_f32(want))));
              const uint8_t got_code = unpack_e2m1(got_d[(at + size_t(j)) / 2], j % 2);
              ok_d = ok_d && (live[size_t(r)] ? got_code == codes[j] : got_d[(at + size_t(j)) / 2] == 0xFF);
            }
            ok_s = ok_s && got_s[at / 16] == (live[size_t(r)] ? sc : uint8_t(0xFF));
          }
          if (!ok_v || !ok_d || !ok_s) {
            ++bad;
            ADD_FAILURE() << "row " << r << (live[size_t(r)] ? "" : " (no expert's: must stay as it was)")
                          << (ok_v ? "" : " values differ") << (ok_d ? "" : " codes differ")
                          << (ok_s ? "" : " scales differ");
          }
        }
        for (const DeviceBuffer* b : {&d_h, &d_fp4, &d_sc}) EXPECT_EQ(b->guard_damage(), "");
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Combine and batched writeback
// ---------------------------------------------------------------------------
TEST(CudaCombine, MatchesReferenceLoopBitExact) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // k = 4, and k past the kernel's batch of 8 slots: 9 (a batch and one), 17
  for (const int64_t k : {int64_t(4), int64_t(9), int64_t(17)}) {
    SCOPED_TRACE("k " + std::to_string(k));
    const int64_t T = 19, H = 1040, N = T * k;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> y(size_t(N * H)), w(static_cast<size_t>(N)), old(size_t(T * H));
    for (auto& v : y) v = nd(rng);
    for (auto& v : w) v = std::fabs(nd(rng));
    for (auto& v : old) v = nd(rng);
    // a random permutation of the slots, a few of them unrouted
    std::vector<int32_t> slot_row(static_cast<size_t>(N));
    for (int64_t s = 0; s < N; ++s) slot_row[s] = int32_t(s);
    std::shuffle(slot_row.begin(), slot_row.end(), rng);
    for (int64_t s = 0; s < N; s += 5) slot_row[s] = -1;
    DeviceBuffer d_y(y), d_w(w), d_slot(slot_row);
    for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
      for (bool accumulate : {false, true}) {
        for (bool unweighted : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + (accumulate ? " accumulate" : "") + (unweighted ? " w=1" : ""));
          std::vector<float> init_exact;
          const auto init = as_dtype(old, dt, init_exact);
          std::vector<float> want(size_t(T * H));
          for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < H; ++i) {
              float acc = 0.0f;
              for (int64_t j = 0; j < k; ++j) {
                const int32_t r = slot_row[t * k + j];
                if (r < 0) continue;
                const float wj = unweighted ? 1.0f : w[t * k + j];
                const float prod = wj * y[size_t(r) * H + i];
                acc = acc + prod;
              }
              std::vector<uint8_t> cell(dtype_size(dt));
              const float v = accumulate ? init_exact[t * H + i] + acc : acc;
              detail::write_activation(cell.data(), dt, 0, v);
              want[t * H + i] = detail::read_activation(cell.data(), dt, 0);
            }
          DeviceBuffer out(size_t(T * H) * dtype_size(dt));
          if (accumulate) out.upload(init);
          cuda::CombineArgs a;
          a.y = d_y.as<float>();
          a.slot_row = d_slot.as<int32_t>();
          a.topk_weights = unweighted ? nullptr : d_w.as<float>();
          a.T = T;
          a.k = k;
          a.H = H;
          a.out = out.data();
          a.out_dtype = dt;
          a.out_stride = H;
          a.accumulate = accumulate;
          cuda::combine(a, nullptr);
          const auto raw = out.download<uint8_t>();
          for (int64_t i = 0; i < T * H; ++i) {
            const float g = detail::read_activation(raw.data(), dt, i);
            if (!(std::memcmp(&g, &want[i], 4) == 0)) {
              ADD_FAILURE() << "out[" << i / H << ", " << i % H << "]: gpu " << g << ", oracle " << want[i];
              break;
            }
          }
          EXPECT_EQ(out.guard_damage(), "");
        }
      }
    }
  }
}

TEST(CudaCombine, BatchedWritebackOnlyRowsBelowCount) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const int64_t L = 4, M = 6, H = 64;
  const std::vector<int32_t> count = {6, 0, 2, 5};
  std::vector<float> y(size_t(L * M * H));
  for (size_t i = 0; i < y.size(); ++i) y[i] = float(i % 977) * 0.37f - 100.0f;
  DeviceBuffer d_y(y), d_c(count);
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    DeviceBuffer out(size_t(L * M * H) * dtype_size(dt));
    cuda::batched_writeback(d_y.as<float>(), d_c.as<int32_t>(), L, M, H, out.data(), dt, false, nullptr);
    const auto raw = out.download<uint8_t>();
    const size_t es = dtype_size(dt);
    for (int64_t row = 0; row < L * M; ++row) {
      const bool live = row % M < count[row / M];
      for (int64_t i = 0; i < H; ++i) {
        const int64_t at = row * H + i;
        bool ok;
        if (live) {
          std::vector<uint8_t> cell(es);
          detail::write_activation(cell.data(), dt, 0, y[at]);
          ok = std::memcmp(cell.data(), raw.data() + at * es, es) == 0;
        } else {
          ok = std::all_of(raw.begin() + at * es, raw.begin() + (at + 1) * es, [](uint8_t b) { return b == 0xFF; });
        }
        if (!ok) {
          ADD_FAILURE() << "row " << row << " col " << i << (live ? ": wrong value" : ": written past its count");
          row = L * M;
          break;
        }
      }
    }
    EXPECT_EQ(out.guard_damage(), "");
  }
}

}  // namespace
}  // namespace fp4moe::testing
