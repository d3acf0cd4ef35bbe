// The reference layer against a second, dense formulation written here: every expert's
// weights are first decoded from the CHECKPOINT tensors (not the fixture's canonical
// copy) into float matrices, then tokens and slots are looped over. Also: the batched
// format against the standard one, expert maps, dtypes, accumulate, poisoned outputs and
// guard bytes, and the backend entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fp4moe/format.h"
#include "moe_fixtures.hpp"
#include "reference/reference.hpp"

namespace fp4moe {
namespace {

using testing::MoECase;
using testing::MoEProblem;

// ---------------------------------------------------------------------------
// The dense oracle
// ---------------------------------------------------------------------------
struct Dense {
  int64_t EL = 0, H = 0, I = 0;
  std::vector<float> w13;  // [EL, 2I, H] gate rows [0, I), up rows [I, 2I)
  std::vector<float> w2;   // [EL, H, I]
  std::vector<float> b13;  // [EL, 2I] same row order, or empty
  std::vector<float> b2;   // [EL, H] or empty
  float a13 = 1, a2 = 1;   // activation dq_scale (max over experts)
};

// (R, K) FP4 matrix of one expert from checkpoint bytes, row r written to dst row map(r).
template <class RowMap>
void decode(const uint8_t* data, const uint8_t* scale, bool nvfp4, float dq, int64_t R, int64_t K, float* dst,
            RowMap map) {
  const int64_t blk = nvfp4 ? 16 : 32;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t code = uint8_t((data[r * K / 2 + k / 2] >> (4 * (k % 2))) & 15);
      const uint8_t sc = scale[r * (K / blk) + k / blk];
      const float s = nvfp4 ? e4m3_to_f32(sc) : e8m0_to_f32(sc);
      dst[map(r) * K + k] = (e2m1_to_f32(code) * s) * dq;
    }
}

float to_f32(const TensorView& t, int64_t i) {
  return t.dtype == DType::f32 ? static_cast<const float*>(t.data)[i]
                               : bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
}

Dense densify(const MoEProblem& p) {
  const CheckpointWeights& w = p.weights;
  Dense d;
  d.EL = w.w13.shape[0];
  d.H = p.c.H;
  d.I = p.c.I;
  const int64_t EL = d.EL, H = d.H, I = d.I;
  const bool nv = p.c.wf == WeightFormat::nvfp4;
  const bool inter = p.c.gate_up == GateUpLayout::interleaved;
  auto canon = [&](int64_t r) { return inter ? (r % 2 ? I + r / 2 : r / 2) : r; };
  d.w13.resize(size_t(EL * 2 * I * H));
  d.w2.resize(size_t(EL * H * I));
  for (int64_t e = 0; e < EL; ++e) {
    const float dq13 = nv ? static_cast<const float*>(w.w13_scale_2.data)[e] : 1.0f;
    const float dq2 = nv ? static_cast<const float*>(w.w2_scale_2.data)[e] : 1.0f;
    const int64_t blk = nv ? 16 : 32;
    decode(static_cast<const uint8_t*>(w.w13.data) + e * 2 * I * H / 2,
           static_cast<const uint8_t*>(w.w13_scale.data) + e * 2 * I * H / blk, nv, dq13, 2 * I, H,
           d.w13.data() + e * 2 * I * H, canon);
    decode(static_cast<const uint8_t*>(w.w2.data) + e * H * I / 2,
           static_cast<const uint8_t*>(w.w2_scale.data) + e * H * I / blk, nv, dq2, H, I, d.w2.data() + e * H * I,
           [](int64_t r) { return r; });
  }
  if (w.w13_bias.present()) {
    d.b13.resize(size_t(EL * 2 * I));
    d.b2.resize(size_t(EL * H));
    for (int64_t e = 0; e < EL; ++e)
      for (int64_t r = 0; r < 2 * I; ++r) d.b13[e * 2 * I + canon(r)] = to_f32(w.w13_bias, e * 2 * I + r);
    for (int64_t i = 0; i < EL * H; ++i) d.b2[i] = to_f32(w.w2_bias, i);
  }
  if (w.w13_input_scale.present()) {
    const float* a = static_cast<const float*>(w.w13_input_scale.data);
    const float* b = static_cast<const float*>(w.w2_input_scale.data);
    d.a13 = *std::max_element(a, a + EL);
    d.a2 = *std::max_element(b, b + EL);
  }
  return d;
}

// NVFP4 round trip written from SPEC §2, on blocks of 16.
void fake_quant(float* v, int64_t n, float dq) {
  const float gs = 1.0f / dq;
  for (int64_t b = 0; b < n; b += 16) {
    float amax = 0;
    for (int64_t i = b; i < b + 16; ++i) amax = std::max(amax, std::fabs(v[i]));
    const uint8_t sc = e4m3_from_f32(gs * (amax * (1.0f / 6.0f)));
    const float s = e4m3_to_f32(sc);
    const float inv = s == 0.0f ? 0.0f : 1.0f / (s * (1.0f / gs));
    for (int64_t i = b; i < b + 16; ++i) v[i] = (e2m1_to_f32(e2m1_from_f32(v[i] * inv)) * s) * dq;
  }
}

float dense_dot(const float* w, const float* a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(w[i]) * double(a[i]);
  return float(s);
}

// y (H) of local expert e for the GEMM-1 input a (H).
std::vector<float> dense_expert(const Dense& d, const LayerDesc& desc, int64_t e, const std::vector<float>& a) {
  const int64_t H = d.H, I = d.I;
  std::vector<float> h(I), y(H);
  for (int64_t i = 0; i < I; ++i) {
    float g = dense_dot(&d.w13[(e * 2 * I + i) * H], a.data(), H);
    float u = dense_dot(&d.w13[(e * 2 * I + I + i) * H], a.data(), H);
    if (!d.b13.empty()) {
      g += d.b13[e * 2 * I + i];
      u += d.b13[e * 2 * I + I + i];
    }
    float v;
    if (desc.activation == Activation::silu) {
      v = g / (1.0f + std::exp(-g)) * u;
    } else {
      g = std::min(g, 7.0f);
      u = std::max(-7.0f, std::min(u, 7.0f));
      v = (u + 1.0f) * g * (1.0f / (1.0f + std::exp(-1.702f * g)));
    }
    h[i] = round_bf16(v);
  }
  if (desc.act_quant == ActQuant::nvfp4) fake_quant(h.data(), I, d.a2);
  for (int64_t o = 0; o < H; ++o) y[o] = dense_dot(&d.w2[(e * H + o) * I], h.data(), I) + (d.b2.empty() ? 0.0f : d.b2[e * H + o]);
  return y;
}

// out [T, H] fp32 before the final rounding, from bf16 inputs x.
std::vector<float> dense_forward(const MoEProblem& p, const Dense& d) {
  const int64_t T = p.c.T, H = p.c.H, k = p.c.k;
  std::vector<float> out(size_t(T * H));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> acc(H, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t id = p.topk_ids[t * k + j];
      if (id < 0) continue;
      const int32_t e = p.expert_map.empty() ? id : p.expert_map[id];
      if (e < 0) continue;
      float wj = p.topk_weights[t * k + j];
      std::vector<float> a(H);
      for (int64_t i = 0; i < H; ++i) a[i] = bf16_to_f32(p.x[t * H + i]);
      if (p.c.router_weight_on_input) {
        for (float& v : a) v = round_bf16(v * wj);
        wj = 1.0f;
      }
      if (p.desc.act_quant == ActQuant::nvfp4) fake_quant(a.data(), H, d.a13);
      const auto y = dense_expert(d, p.desc, e, a);
      for (int64_t i = 0; i < H; ++i) acc[i] += wj * y[i];
    }
    for (int64_t i = 0; i < H; ++i) out[t * H + i] = (p.c.accumulate ? bf16_to_f32(p.out_init[t * H + i]) : 0.0f) + acc[i];
  }
  return out;
}

// ---------------------------------------------------------------------------
// Running the reference into a poisoned, guarded buffer
// ---------------------------------------------------------------------------
constexpr size_t kGuard = 64;  // bytes each side
constexpr uint8_t kGuardByte = 0xA5;

// Bytes of `n` elements of dtype, poisoned with 0xFF (NaN in f32, bf16 and f16), between guards.
struct Guarded {
  std::vector<uint8_t> buf;
  DType dt;
  size_t n;
  Guarded(DType d, size_t count) : buf(count * dtype_size(d) + 2 * kGuard, 0xFF), dt(d), n(count) {
    std::fill_n(buf.begin(), kGuard, kGuardByte);
    std::fill_n(buf.end() - kGuard, kGuard, kGuardByte);
  }
  void* data() { return buf.data() + kGuard; }
  float at(size_t i) const {
    const void* b = buf.data() + kGuard;
    switch (dt) {
      case DType::f32: return static_cast<const float*>(b)[i];
      case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(b)[i]);
      default: return bf16_to_f32(static_cast<const uint16_t*>(b)[i]);
    }
  }
  std::vector<float> all() const {
    std::vector<float> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = at(i);
    return r;
  }
  bool guards_intact() const {
    return std::all_of(buf.begin(), buf.begin() + kGuard, [](uint8_t b) { return b == kGuardByte; }) &&
           std::all_of(buf.end() - kGuard, buf.end(), [](uint8_t b) { return b == kGuardByte; });
  }
};

struct RunOpts {
  DType out = DType::f32;
  TensorView hidden;                 // default: the problem's bf16 x
  const std::vector<int32_t>* ids = nullptr;  // default: the problem's ids
};

Guarded run_ref(const MoEProblem& p, const RunOpts& o = {}) {
  const int64_t T = p.c.T, H = p.c.H;
  Guarded out(o.out, size_t(T * H));
  if (p.c.accumulate)
    for (int64_t i = 0; i < T * H; ++i) {
      const float v = bf16_to_f32(p.out_init[i]);
      if (o.out == DType::f32) static_cast<float*>(out.data())[i] = v;
      else if (o.out == DType::f16) static_cast<uint16_t*>(out.data())[i] = f16_from_f32(v);
      else static_cast<uint16_t*>(out.data())[i] = bf16_from_f32(v);
    }
  ForwardArgs a;
  a.hidden_states = o.hidden.present() ? o.hidden : p.hidden_view();
  a.topk_weights = p.topk_weights_view();
  a.topk_ids = o.ids ? TensorView::of(o.ids->data(), DType::i32, {T, p.c.k}) : p.topk_ids_view();
  a.out = TensorView::of(out.data(), o.out, {T, H});
  a.apply_router_weight_on_input = p.c.router_weight_on_input;
  a.accumulate = p.c.accumulate;
  std::vector<float> scratch(detail::reference_scratch_floats(*p.host));
  detail::reference_forward(*p.host, a, scratch.data());
  return out;
}

void expect_all_finite(const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << "element " << i << " not written";
}

// Small cases of the conformance table (every format, activation and irregular routing).
std::vector<MoECase> small_cases() {
  std::vector<MoECase> v;
  for (const MoECase& c : testing::conformance_cases(false))
    if (c.H * c.I <= 512 * 512) v.push_back(c);
  return v;
}

class ReferenceCase : public ::testing::TestWithParam<MoECase> {};

TEST_P(ReferenceCase, MatchesDenseFormulation) {
  const MoEProblem p = testing::make_problem(GetParam());
  const Dense d = densify(p);
  const auto want = dense_forward(p, d);
  const Guarded got = run_ref(p);
  EXPECT_TRUE(got.guards_intact());
  const auto g = got.all();
  expect_all_finite(g);
  const double err = testing::rel_l2(g, want);
  EXPECT_LT(err, 1e-5) << GetParam().name;
  // the output is not trivially zero; unless every slot is empty: then it is exactly zero
  const int64_t nonzero = std::count_if(g.begin(), g.end(), [](float v) { return v != 0.0f; });
  const bool routed = std::any_of(p.topk_ids.begin(), p.topk_ids.end(), [&](int32_t id) {
    return id >= 0 && id < p.c.E && (p.expert_map.empty() || p.expert_map[size_t(id)] >= 0);
  });
  if (routed || p.c.accumulate) EXPECT_GT(nonzero, int64_t(g.size() / 2));
  else EXPECT_EQ(nonzero, 0) << "no slot is routed";
}

TEST_P(ReferenceCase, OutDtypesAreOneRoundingOfTheFp32Result) {
  const MoEProblem p = testing::make_problem(GetParam());
  const auto f32 = run_ref(p, {.out = DType::f32}).all();
  for (DType dt : {DType::bf16, DType::f16}) {
    const Guarded o = run_ref(p, {.out = dt});
    EXPECT_TRUE(o.guards_intact());
    for (size_t i = 0; i < f32.size(); ++i) {
      const float want = dt == DType::bf16 ? round_bf16(f32[i]) : f16_to_f32(f16_from_f32(f32[i]));
      ASSERT_EQ(o.at(i), want) << dtype_name(dt) << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Small, ReferenceCase, ::testing::ValuesIn(small_cases()),
                         [](const ::testing::TestParamInfo<MoECase>& i) { return i.param.name; });

// f32 and f16 hidden states are rounded to bf16 before anything else.
TEST(Reference, WideInputsAreRoundedToBf16First) {
  MoECase c{.name = "in", .H = 128, .I = 64, .E = 8, .k = 2, .T = 9, .aq = ActQuant::nvfp4, .seed = 5};
  MoEProblem p = testing::make_problem(c);
  const int64_t n = c.T * c.H;
  std::vector<float> x32(n);
  std::vector<uint16_t> x16(n);
  for (int64_t i = 0; i < n; ++i) {
    // off the bf16 grid, so that the rounding matters
    x32[i] = bf16_to_f32(p.x[i]) * (1.0f + 0.0017f * float(i % 7));
    x16[i] = f16_from_f32(x32[i]);
  }
  const auto got32 = run_ref(p, {.hidden = TensorView::of(x32.data(), DType::f32, {c.T, c.H})}).all();
  const auto got16 = run_ref(p, {.hidden = TensorView::of(x16.data(), DType::f16, {c.T, c.H})}).all();
  std::vector<uint16_t> orig = p.x;
  for (int64_t i = 0; i < n; ++i) p.x[i] = bf16_from_f32(x32[i]);
  const auto want32 = run_ref(p).all();
  for (int64_t i = 0; i < n; ++i) p.x[i] = bf16_from_f32(f16_to_f32(x16[i]));
  const auto want16 = run_ref(p).all();
  EXPECT_EQ(got32, want32);
  EXPECT_EQ(got16, want16);
  p.x = orig;
  EXPECT_NE(run_ref(p).all(), want32);  // the perturbation did change the input
}

// Slots whose expert is not local contribute exactly 0: same result as marking them -1.
TEST(Reference, ExpertMapDropsNonLocalExperts) {
  for (uint64_t seed : {26, 27}) {
    MoECase c{.name = "ep", .H = 128, .I = 64, .E = 16, .k = 4, .T = 31, .E_local = 6, .seed = seed};
    const MoEProblem p = testing::make_problem(c);
    std::vector<int32_t> ids = p.topk_ids;
    int dropped = 0;
    for (int32_t& id : ids)
      if (id >= 0 && p.expert_map[id] < 0) id = -1, ++dropped;
    ASSERT_GT(dropped, 0);
    EXPECT_EQ(run_ref(p).all(), run_ref(p, {.ids = &ids}).all());
  }
}

// accumulate: out = round(out_before + layer) with one rounding.
TEST(Reference, AccumulateAddsToExistingContent) {
  MoECase c{.name = "acc", .H = 128, .I = 64, .E = 8, .k = 2, .T = 11, .seed = 6};
  MoEProblem p = testing::make_problem(c);
  const auto layer = run_ref(p).all();  // accumulate off: the fp32 layer output
  p.c.accumulate = true;
  const Guarded o = run_ref(p, {.out = DType::bf16});
  EXPECT_TRUE(o.guards_intact());
  for (size_t i = 0; i < layer.size(); ++i)
    ASSERT_EQ(o.at(i), round_bf16(bf16_to_f32(p.out_init[i]) + layer[i])) << i;
}

// apply_router_weight_on_input with k = 1 scales x (rounded to bf16), not y.
TEST(Reference, RouterWeightOnInputScalesTheInput) {
  MoECase c{.name = "rwi", .H = 128, .I = 64, .E = 8, .k = 1, .T = 9, .seed = 7};
  MoEProblem p = testing::make_problem(c);
  for (int64_t t = 0; t < c.T; ++t) ASSERT_NE(p.topk_weights[t], 1.0f);  // else nothing is tested
  p.c.router_weight_on_input = true;
  const auto got = run_ref(p).all();
  // the same tokens pre-scaled by hand, weights set to 1
  MoEProblem q = testing::make_problem(c);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t i = 0; i < c.H; ++i)
      q.x[t * c.H + i] = bf16_from_f32(bf16_to_f32(q.x[t * c.H + i]) * q.topk_weights[t]);
    q.topk_weights[t] = 1.0f;
  }
  EXPECT_EQ(got, run_ref(q).all());
  p.c.router_weight_on_input = false;
  EXPECT_NE(got, run_ref(p).all());  // silu is not linear: the two placements differ
}

// ---------------------------------------------------------------------------
// Batched format
// ---------------------------------------------------------------------------
struct Batched {
  int64_t M = 0;
  std::vector<int32_t> count;                     // [EL]
  std::vector<std::vector<std::pair<int64_t, int64_t>>> rows;  // per expert: (t, j) of each row
  std::vector<uint16_t> x;                        // [EL, M, H] bf16
  std::vector<uint8_t> q, qs;                     // [EL, M, H/2], [EL, M, H/16] NVFP4 of x
};

Batched to_batched(const MoEProblem& p, float a13) {
  const int64_t EL = p.host->num_local, H = p.c.H, k = p.c.k;
  Batched b;
  b.rows.resize(EL);
  for (int64_t t = 0; t < p.c.T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t id = p.topk_ids[t * k + j];
      const int32_t e = id < 0 ? -1 : p.expert_map.empty() ? id : p.expert_map[id];
      if (e >= 0) b.rows[e].push_back({t, j});
    }
  for (auto& r : b.rows) b.M = std::max<int64_t>(b.M, int64_t(r.size()));
  b.M += 2;  // rows past every count, which must stay untouched
  b.x.assign(size_t(EL * b.M * H), bf16_from_f32(NAN));  // never read
  b.q.assign(size_t(EL * b.M * H / 2), 0xFF);
  b.qs.assign(size_t(EL * b.M * H / 16), 0xFF);
  const float gs = 1.0f / a13;
  for (int64_t e = 0; e < EL; ++e) {
    b.count.push_back(int32_t(b.rows[e].size()));
    for (size_t r = 0; r < b.rows[e].size(); ++r) {
      const int64_t row = e * b.M + int64_t(r), t = b.rows[e][r].first;
      std::copy_n(p.x.data() + t * H, H, b.x.data() + row * H);
      for (int64_t blk = 0; blk < H / 16; ++blk) {  // SPEC §2 quantization of the bf16 row
        float amax = 0;
        for (int64_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(bf16_to_f32(p.x[t * H + blk * 16 + i])));
        const uint8_t sc = e4m3_from_f32(gs * (amax * (1.0f / 6.0f)));
        const float s = e4m3_to_f32(sc);
        const float inv = s == 0.0f ? 0.0f : 1.0f / (s * (1.0f / gs));
        b.qs[row * H / 16 + blk] = sc;
        for (int64_t i = 0; i < 16; i += 2) {
          const uint8_t lo = e2m1_from_f32(bf16_to_f32(p.x[t * H + blk * 16 + i]) * inv);
          const uint8_t hi = e2m1_from_f32(bf16_to_f32(p.x[t * H + blk * 16 + i + 1]) * inv);
          b.q[row * H / 2 + (blk * 16 + i) / 2] = uint8_t(lo | (hi << 4));
        }
      }
    }
  }
  return b;
}

// The standard output equals the combine, done here, of the batched per-expert outputs.
void check_batched(const MoECase& c, bool nvfp4_input) {
  const MoEProblem p = testing::make_problem(c);
  const int64_t EL = p.host->num_local, H = c.H, k = c.k;
  const Batched b = to_batched(p, p.host->a13_dq);
  Guarded out(DType::f32, size_t(EL * b.M * H));
  BatchedArgs a;
  if (nvfp4_input) {
    a.hidden_states = TensorView::of(b.q.data(), DType::u8, {EL, b.M, H / 2});
    a.hidden_scale = TensorView::of(b.qs.data(), DType::e4m3, {EL, b.M, H / 16});
  } else {
    a.hidden_states = TensorView::of(b.x.data(), DType::bf16, {EL, b.M, H});
  }
  a.expert_num_tokens = TensorView::of(b.count.data(), DType::i32, {EL});
  a.out = TensorView::of(out.data(), DType::f32, {EL, b.M, H});
  std::vector<float> scratch(detail::reference_scratch_floats(*p.host));
  detail::reference_forward_batched(*p.host, a, scratch.data());
  EXPECT_TRUE(out.guards_intact());

  std::vector<float> combined(size_t(c.T * H), 0.0f);
  std::vector<std::vector<int64_t>> row_of(c.T, std::vector<int64_t>(k, -1));
  for (int64_t e = 0; e < EL; ++e)
    for (size_t r = 0; r < b.rows[e].size(); ++r) row_of[b.rows[e][r].first][b.rows[e][r].second] = e * b.M + int64_t(r);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t j = 0; j < k; ++j)
      if (row_of[t][j] >= 0)
        for (int64_t i = 0; i < H; ++i) combined[t * H + i] += p.topk_weights[t * k + j] * out.at(row_of[t][j] * H + i);
  EXPECT_EQ(combined, run_ref(p).all());

  for (int64_t e = 0; e < EL; ++e)
    for (int64_t r = 0; r < b.M; ++r)
      for (int64_t i = 0; i < H; ++i) {
        const float v = out.at((e * b.M + r) * H + i);
        if (r < b.count[e]) ASSERT_TRUE(std::isfinite(v)) << e << "," << r << "," << i;
        else ASSERT_TRUE(std::isnan(v)) << "row past the count of expert " << e << " was written";
      }
}

TEST(ReferenceBatched, EqualsStandardW4A16) {
  check_batched({.name = "b", .H = 128, .I = 64, .E = 8, .k = 2, .T = 23, .routing = testing::Routing::skewed, .seed = 8}, false);
}
TEST(ReferenceBatched, EqualsStandardW4A4Bf16Input) {
  check_batched({.name = "b", .H = 128, .I = 64, .E = 8, .k = 2, .T = 23, .aq = ActQuant::nvfp4, .seed = 9}, false);
}
TEST(ReferenceBatched, EqualsStandardW4A4Nvfp4Input) {
  check_batched({.name = "b", .H = 128, .I = 64, .E = 8, .k = 2, .T = 23, .aq = ActQuant::nvfp4, .seed = 10}, true);
}
TEST(ReferenceBatched, EqualsStandardMxfp4BiasWithExpertMap) {
  check_batched({.name = "b", .H = 128, .I = 64, .E = 12, .k = 3, .T = 23, .wf = WeightFormat::mxfp4,
                 .act = Activation::swiglu_oai, .gate_up = GateUpLayout::interleaved, .bias = true, .E_local = 5,
                 .routing = testing::Routing::with_invalid, .seed = 11},
                false);
}

// ---------------------------------------------------------------------------
// The backend entry
// ---------------------------------------------------------------------------
TEST(ReferenceBackend, EntryServesEverythingAndMatchesTheLayer) {
  const detail::BackendEntry entry = detail::reference_backend_entry();
  EXPECT_STREQ(entry.name, "reference");
  EXPECT_EQ(entry.device, DeviceType::cpu);
  EXPECT_EQ(entry.why_not_here(), "");
  MoECase c{.name = "be", .H = 128, .I = 64, .E = 8, .k = 2, .T = 5, .wf = WeightFormat::mxfp4, .bias = true, .seed = 12};
  const MoEProblem p = testing::make_problem(c);
  EXPECT_EQ(entry.why_not_for(p.desc), "");
  const auto backend = entry.create(p.host, PrepareOptions{});
  EXPECT_EQ(backend->name, "reference");
  EXPECT_EQ(backend->num_local, 8);

  // workspace at an odd address: the backend aligns its floats itself
  std::vector<uint8_t> ws(backend->workspace_size(c.T) + 1);
  Guarded out(DType::bf16, size_t(c.T * c.H));
  ForwardArgs a;
  a.hidden_states = p.hidden_view();
  a.topk_weights = p.topk_weights_view();
  a.topk_ids = p.topk_ids_view();
  a.out = TensorView::of(out.data(), DType::bf16, {c.T, c.H});
  a.workspace = TensorView::of(ws.data() + 1, DType::u8, {int64_t(ws.size() - 1)});
  backend->forward(a);
  EXPECT_TRUE(out.guards_intact());
  EXPECT_EQ(out.all(), testing::run_reference(p, DType::bf16));
}

// The public path (prepare -> "reference" backend -> forward) equals the reference run on
// the fixture's own canonical weights: prepare's conversion of the checkpoint (interleave,
// biases, input-scale max, expert map) agrees with the fixture's.
TEST(ReferenceBackend, PublicLayerMatchesFixtureWeights) {
  for (const char* name : {"ep_map_mxfp4_bias", "ep_map_shuffled_w4a4", "nvfp4_w4a4_interleaved", "invalid_ids",
                           "top1_router_weight_on_input"}) {
    MoECase c;
    for (const MoECase& x : testing::conformance_cases(false))
      if (x.name == name) c = x;
    ASSERT_EQ(c.name, name);
    c.T = std::min<int64_t>(c.T, 9);
    const MoEProblem p = testing::make_problem(c);
    PrepareOptions opt;
    opt.backend = "reference";
    const Layer layer = Layer::prepare(p.desc, p.weights, opt);
    EXPECT_EQ(layer.backend(), "reference");
    std::vector<uint8_t> ws(layer.workspace_size(c.T));
    Guarded out(DType::bf16, size_t(c.T * c.H));
    ForwardArgs a;
    a.hidden_states = p.hidden_view();
    a.topk_weights = p.topk_weights_view();
    a.topk_ids = p.topk_ids_view();
    a.out = TensorView::of(out.data(), DType::bf16, {c.T, c.H});
    a.workspace = TensorView::of(ws.data(), DType::u8, {int64_t(ws.size())});
    a.apply_router_weight_on_input = c.router_weight_on_input;
    layer.forward(a);
    EXPECT_TRUE(out.guards_intact());
    EXPECT_EQ(out.all(), testing::run_reference(p, DType::bf16)) << name;
  }
}

}  // namespace
}  // namespace fp4moe
