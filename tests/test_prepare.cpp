// prepare (src/prepare): checkpoint -> canonical HostWeights. The oracle is the
// checkpoint itself, reordered by hand in these tests where the layout changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "fp4moe/format.h"
#include "parallel.hpp"
#include "prepare/host_bytes.hpp"
#include "prepare/prepare.hpp"

namespace fp4moe {
namespace {

// The prepared bytes as a plain vector (HostBytes allocates without zeroing; its bytes compare
// the same).
std::vector<uint8_t> bytes(const detail::HostBytes& v) { return {v.begin(), v.end()}; }

// A small checkpoint with random codes and valid scales, owning its storage.
struct Ckpt {
  LayerDesc d;
  int64_t EL = 0;
  std::vector<uint8_t> w13, w13_scale, w2, w2_scale;
  std::vector<float> w13_scale_2, w2_scale_2, w13_in, w2_in;
  std::vector<uint16_t> w13_bias, w2_bias;  // bf16
  std::vector<int32_t> map;
  bool bias = false;

  CheckpointWeights views() const {
    const int64_t H = d.hidden, I = d.intermediate, b = d.weight_format == WeightFormat::nvfp4 ? 16 : 32;
    const DType st = d.weight_format == WeightFormat::nvfp4 ? DType::e4m3 : DType::e8m0;
    CheckpointWeights w;
    w.w13 = TensorView::of(w13.data(), DType::u8, {EL, 2 * I, H / 2});
    w.w13_scale = TensorView::of(w13_scale.data(), st, {EL, 2 * I, H / b});
    w.w2 = TensorView::of(w2.data(), DType::u8, {EL, H, I / 2});
    w.w2_scale = TensorView::of(w2_scale.data(), st, {EL, H, I / b});
    if (d.weight_format == WeightFormat::nvfp4) {
      w.w13_scale_2 = TensorView::of(w13_scale_2.data(), DType::f32, {EL});
      w.w2_scale_2 = TensorView::of(w2_scale_2.data(), DType::f32, {EL});
    }
    if (d.act_quant == ActQuant::nvfp4) {
      w.w13_input_scale = TensorView::of(w13_in.data(), DType::f32, {EL});
      w.w2_input_scale = TensorView::of(w2_in.data(), DType::f32, {EL});
    }
    if (bias) {
      w.w13_bias = TensorView::of(w13_bias.data(), DType::bf16, {EL, 2 * I});
      w.w2_bias = TensorView::of(w2_bias.data(), DType::bf16, {EL, H});
    }
    if (!map.empty()) w.expert_map = TensorView::of(map.data(), DType::i32, {d.num_experts});
    return w;
  }
};

LayerDesc small_desc(WeightFormat wf = WeightFormat::nvfp4, ActQuant aq = ActQuant::none) {
  LayerDesc d;
  d.hidden = 64;
  d.intermediate = 32;
  d.num_experts = 4;
  d.top_k = 2;
  d.weight_format = wf;
  d.act_quant = aq;
  if (wf == WeightFormat::mxfp4) d.activation = Activation::swiglu_oai;
  return d;
}

Ckpt make_ckpt(const LayerDesc& d, int64_t EL = 0, bool bias = false) {
  std::mt19937 rng(std::random_device{}());
  Ckpt c;
  c.d = d;
  c.EL = EL ? EL : d.num_experts;
  c.bias = bias;
  const int64_t H = d.hidden, I = d.intermediate, b = d.weight_format == WeightFormat::nvfp4 ? 16 : 32;
  auto bytes = [&](size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> u(lo, hi);
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = uint8_t(u(rng));
    return v;
  };
  auto floats = [&](size_t n) {
    std::uniform_real_distribution<float> u(0.01f, 2.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  const bool nv = d.weight_format == WeightFormat::nvfp4;
  c.w13 = bytes(size_t(c.EL * 2 * I * H / 2), 0, 255);
  c.w2 = bytes(size_t(c.EL * H * I / 2), 0, 255);
  c.w13_scale = bytes(size_t(c.EL * 2 * I * H / b), nv ? 0x00 : 100, nv ? 0x7E : 140);  // no NaN codes
  c.w2_scale = bytes(size_t(c.EL * H * I / b), nv ? 0x00 : 100, nv ? 0x7E : 140);
  c.w13_scale_2 = floats(size_t(c.EL));
  c.w2_scale_2 = floats(size_t(c.EL));
  c.w13_in = floats(size_t(c.EL));
  c.w2_in = floats(size_t(c.EL));
  std::normal_distribution<float> n(0.f, 1.f);
  for (int64_t i = 0; i < c.EL * 2 * I; ++i) c.w13_bias.push_back(bf16_from_f32(n(rng)));
  for (int64_t i = 0; i < c.EL * H; ++i) c.w2_bias.push_back(bf16_from_f32(n(rng)));
  if (c.EL != d.num_experts) {  // local experts at random global positions
    std::vector<int32_t> g(size_t(d.num_experts));
    for (size_t i = 0; i < g.size(); ++i) g[i] = int32_t(i);
    std::shuffle(g.begin(), g.end(), rng);
    c.map.assign(size_t(d.num_experts), -1);
    for (int64_t l = 0; l < c.EL; ++l) c.map[size_t(g[size_t(l)])] = int32_t(l);
  }
  return c;
}

// Runs f, which must throw Error of `kind` whose message contains every needle.
template <class F>
void expect_error(F&& f, ErrorKind kind, std::initializer_list<const char*> needles) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing '" << n << "' in: " << e.what();
    return;
  }
  ADD_FAILURE() << "no fp4moe::Error thrown";
}

void expect_bad(const Ckpt& c, const CheckpointWeights& w, std::initializer_list<const char*> needles,
                ErrorKind kind = ErrorKind::invalid_argument) {
  expect_error([&] { detail::prepare_host_weights(c.d, w); }, kind, needles);
}

// ---------------------------------------------------------------------------
// Canonicalization
// ---------------------------------------------------------------------------
// ---------------------------------------------------------------------------
// The parallel fill (host_bytes.hpp)
// ---------------------------------------------------------------------------
// parallel.hpp's parallel_for: every index once, each on a thread numbered below the count
// asked for, on one thread (the caller's) and on several.
TEST(HostParallel, ForVisitsEveryIndexOnce) {
  for (const int threads : {1, 3, 64})
    for (const int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000), int64_t(100003)}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_tid{0};
      detail::parallel_for(n, threads, [&](int64_t i, int tid) {
        hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
        if (tid < 0 || tid >= threads) bad_tid.fetch_add(1, std::memory_order_relaxed);
      });
      size_t wrong = 0;
      for (const auto& h : hits) wrong += h.load() != 1;
      EXPECT_EQ(wrong, 0u) << "n " << n << ", " << threads << " threads";
      EXPECT_EQ(bad_tid.load(), 0) << "n " << n << ", " << threads << " threads";
    }
}

// Above kParallelCopyMin (on several threads) and below it, contiguous and strided, with a
// tail that is not a whole slice: the same bytes as a row-by-row memcpy, nothing written
// between the rows or past the end.
TEST(PrepareHostBytes, ParallelCopyRowsMatchesMemcpy) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Shape {
    size_t width, src_pitch, dst_pitch, height;
  };
  const size_t big = detail::kParallelCopyMin + 12345;
  const Shape shapes[] = {{big, big, big, 1},           {1000, 1000, 1000, 70001}, {1000, 1536, 1200, 70001},
                          {37, 64, 40, 1000},            {4096, 4096, 4096, 3},      {1, 3, 2, 5}};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(std::to_string(sh.width) + " x " + std::to_string(sh.height));
    std::vector<uint8_t> src((sh.height - 1) * sh.src_pitch + sh.width);
    for (size_t i = 0; i < src.size(); i += 8) {
      const uint64_t r = rng();
      std::memcpy(src.data() + i, &r, std::min<size_t>(8, src.size() - i));
    }
    const size_t dst_bytes = (sh.height - 1) * sh.dst_pitch + sh.width + 64;
    std::vector<uint8_t> want(dst_bytes, 0xA5), got(dst_bytes, 0xA5);
    for (size_t r = 0; r < sh.height; ++r)
      std::memcpy(want.data() + r * sh.dst_pitch, src.data() + r * sh.src_pitch, sh.width);
    detail::parallel_copy_rows(got.data(), sh.dst_pitch, src.data(), sh.src_pitch, sh.width, sh.height);
    EXPECT_TRUE(got == want);
  }
}

TEST(PrepareCanonical, ConcatNvfp4CopiesEveryByteAndScale) {
  const Ckpt c = make_ckpt(small_desc());
  auto hw = detail::prepare_host_weights(c.d, c.views());
  EXPECT_EQ(hw->num_local, 4);
  EXPECT_EQ(hw->block, 16);
  EXPECT_EQ(bytes(hw->w13), c.w13);
  EXPECT_EQ(bytes(hw->w13_scale), c.w13_scale);
  EXPECT_EQ(bytes(hw->w2), c.w2);
  EXPECT_EQ(bytes(hw->w2_scale), c.w2_scale);
  EXPECT_EQ(hw->w13_dq, c.w13_scale_2);
  EXPECT_EQ(hw->w2_dq, c.w2_scale_2);
  EXPECT_EQ(hw->a13_dq, 1.0f);  // W4A16: input scales unused
  EXPECT_TRUE(hw->w13_bias.empty());
  EXPECT_EQ(hw->expert_map, (std::vector<int32_t>{0, 1, 2, 3}));
}

// Small, and above kParallelCopyMin (64 MiB of w13: the experts de-interleaved on several
// threads, the concat copy in slices).
TEST(PrepareCanonical, InterleavedEqualsHandReorderedConcat) {
  for (const bool large : {false, true}) {
    SCOPED_TRACE(large ? "large" : "small");
    LayerDesc d = small_desc(WeightFormat::mxfp4);
    if (large) d.hidden = 4096, d.intermediate = 2048, d.num_experts = 8;
    d.gate_up = GateUpLayout::interleaved;
    const Ckpt inter = make_ckpt(d, 0, /*bias=*/true);
    // The same weights, gate rows then up rows, reordered here by hand.
    Ckpt concat = inter;
    concat.d.gate_up = GateUpLayout::concat;
    const int64_t H = d.hidden, I = d.intermediate, EL = inter.EL;
    auto reorder_rows = [&](const std::vector<uint8_t>& src, int64_t row_bytes) {
      std::vector<uint8_t> dst(src.size());
      for (int64_t e = 0; e < EL; ++e)
        for (int64_t i = 0; i < I; ++i) {
          const uint8_t* ex = src.data() + e * 2 * I * row_bytes;
          uint8_t* out = dst.data() + e * 2 * I * row_bytes;
          std::memcpy(out + i * row_bytes, ex + (2 * i) * row_bytes, size_t(row_bytes));            // gate_i
          std::memcpy(out + (I + i) * row_bytes, ex + (2 * i + 1) * row_bytes, size_t(row_bytes));  // up_i
        }
      return dst;
    };
    concat.w13 = reorder_rows(inter.w13, H / 2);
    concat.w13_scale = reorder_rows(inter.w13_scale, H / 32);
    for (int64_t e = 0; e < EL; ++e)
      for (int64_t i = 0; i < I; ++i) {
        concat.w13_bias[size_t(e * 2 * I + i)] = inter.w13_bias[size_t(e * 2 * I + 2 * i)];
        concat.w13_bias[size_t(e * 2 * I + I + i)] = inter.w13_bias[size_t(e * 2 * I + 2 * i + 1)];
      }
    ASSERT_NE(concat.w13, inter.w13);  // the reorder is not the identity on this data

    auto a = detail::prepare_host_weights(inter.d, inter.views());
    auto b = detail::prepare_host_weights(concat.d, concat.views());
    EXPECT_EQ(a->w13, b->w13);
    EXPECT_EQ(a->w13_scale, b->w13_scale);
    EXPECT_EQ(a->w2, b->w2);
    EXPECT_EQ(a->w2_scale, b->w2_scale);
    ASSERT_EQ(a->w13_bias.size(), b->w13_bias.size());
    EXPECT_EQ(0, std::memcmp(a->w13_bias.data(), b->w13_bias.data(), a->w13_bias.size() * 4));
    EXPECT_EQ(bytes(a->w13), concat.w13);
    EXPECT_EQ(a->desc.gate_up, GateUpLayout::concat);
    // biases: bf16 -> fp32 is exact
    for (size_t i = 0; i < b->w2_bias.size(); ++i) ASSERT_EQ(b->w2_bias[i], bf16_to_f32(concat.w2_bias[i]));
    for (size_t i = 0; i < b->w13_bias.size(); ++i) ASSERT_EQ(b->w13_bias[i], bf16_to_f32(concat.w13_bias[i]));
    // MXFP4: no global scale
    EXPECT_EQ(a->w13_dq, std::vector<float>(size_t(EL), 1.0f));
    EXPECT_EQ(a->w2_dq, std::vector<float>(size_t(EL), 1.0f));
    EXPECT_EQ(a->block, 32);
  }
}

TEST(PrepareCanonical, F32BiasesAreCopiedExactly) {
  const Ckpt c = make_ckpt(small_desc(WeightFormat::mxfp4));
  std::vector<float> b13(size_t(c.EL * 2 * c.d.intermediate)), b2(size_t(c.EL * c.d.hidden));
  for (size_t i = 0; i < b13.size(); ++i) b13[i] = std::ldexp(float(i % 97) - 48.3f, -int(i % 7));
  for (size_t i = 0; i < b2.size(); ++i) b2[i] = 1.0f / float(i + 3);
  CheckpointWeights w = c.views();
  w.w13_bias = TensorView::of(b13.data(), DType::f32, {c.EL, 2 * c.d.intermediate});
  w.w2_bias = TensorView::of(b2.data(), DType::f32, {c.EL, c.d.hidden});
  auto hw = detail::prepare_host_weights(c.d, w);
  EXPECT_EQ(hw->w13_bias, b13);
  EXPECT_EQ(hw->w2_bias, b2);
}

TEST(PrepareCanonical, W4A4InputScalesAreTheMaxOverExperts) {
  Ckpt c = make_ckpt(small_desc(WeightFormat::nvfp4, ActQuant::nvfp4));
  c.w13_in = {0.5f, 3.25f, 1.0f, 0.125f};
  c.w2_in = {7.0f, 0.25f, 6.5f, 7.0f};
  auto hw = detail::prepare_host_weights(c.d, c.views());
  EXPECT_EQ(hw->a13_dq, 3.25f);
  EXPECT_EQ(hw->a2_dq, 7.0f);
}

TEST(PrepareCanonical, ScalesGivenAsU8BytesAreAccepted) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13_scale.dtype = DType::u8;
  w.w2_scale.dtype = DType::u8;
  auto hw = detail::prepare_host_weights(c.d, w);
  EXPECT_EQ(bytes(hw->w13_scale), c.w13_scale);
}

TEST(PrepareExpertMap, GivenMapIsKeptAndLocalExpertsCounted) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  const Ckpt c = make_ckpt(d, 3);
  auto hw = detail::prepare_host_weights(c.d, c.views());
  EXPECT_EQ(hw->num_local, 3);
  EXPECT_EQ(hw->expert_map, c.map);
  EXPECT_EQ(bytes(hw->w13), c.w13);
}

TEST(PrepareExpertMap, ValueAtOrAboveLocalCountIsRejected) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  Ckpt c = make_ckpt(d, 3);
  const size_t g = size_t(std::find(c.map.begin(), c.map.end(), -1) - c.map.begin());
  c.map[g] = 3;
  const std::string at = "got 3 at [" + std::to_string(g) + "]";
  expect_bad(c, c.views(), {"expert_map", at.c_str(), "[0, 3)"});
}

TEST(PrepareExpertMap, ValueBelowMinusOneIsRejected) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  Ckpt c = make_ckpt(d, 3);
  c.map[5] = -2;
  expect_bad(c, c.views(), {"expert_map", "got -2 at [5]"});
}

TEST(PrepareExpertMap, DuplicateLocalIndexIsRejected) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  Ckpt c = make_ckpt(d, 3);
  c.map = {0, -1, 1, -1, 1, 2, -1, -1};
  expect_bad(c, c.views(), {"expert_map", "local index 1 at [2] and at [4]", "exactly once"});
}

TEST(PrepareExpertMap, MissingLocalIndexIsRejected) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  Ckpt c = make_ckpt(d, 3);
  c.map = {0, -1, 1, -1, -1, -1, -1, -1};
  expect_bad(c, c.views(), {"expert_map", "local index 2", "exactly once"});
}

TEST(PrepareExpertMap, WrongShapeOrDtypeIsRejected) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  Ckpt c = make_ckpt(d, 3);
  CheckpointWeights w = c.views();
  w.expert_map = TensorView::of(c.map.data(), DType::i32, {7});
  expect_bad(c, w, {"expert_map", "i32[7]", "need i32[8]"});
  w.expert_map = TensorView::of(c.map.data(), DType::f32, {8});
  expect_bad(c, w, {"expert_map", "got f32[8]"});
}

TEST(PrepareExpertMap, WithoutMapLocalCountMustEqualExperts) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  Ckpt c = make_ckpt(d, 3);
  c.map.clear();
  expect_bad(c, c.views(), {"w13", "got u8[3, 64, 32]", "without expert_map"});
}

// ---------------------------------------------------------------------------
// Descriptor checks
// ---------------------------------------------------------------------------
void expect_bad_desc(const LayerDesc& d, std::initializer_list<const char*> needles) {
  expect_error([&] { detail::validate_desc("Layer::prepare", d); }, ErrorKind::invalid_argument, needles);
  // prepare checks the descriptor before touching any tensor
  expect_error([&] { detail::prepare_host_weights(d, CheckpointWeights{}); }, ErrorKind::invalid_argument, needles);
}

TEST(PrepareDesc, HiddenNotMultipleOfNvfp4BlockIsRejected) {
  LayerDesc d = small_desc();
  d.hidden = 72;
  expect_bad_desc(d, {"desc.hidden", "got 72", "multiple of 16"});
}
TEST(PrepareDesc, HiddenNotMultipleOfMxfp4BlockIsRejected) {
  LayerDesc d = small_desc(WeightFormat::mxfp4);
  d.hidden = 48;
  expect_bad_desc(d, {"desc.hidden", "got 48", "multiple of 32"});
}
TEST(PrepareDesc, IntermediateNotMultipleOfBlockIsRejected) {
  LayerDesc d = small_desc();
  d.intermediate = 40;
  expect_bad_desc(d, {"desc.intermediate", "got 40", "multiple of 16"});
  d = small_desc(WeightFormat::mxfp4);
  d.intermediate = 48;
  expect_bad_desc(d, {"desc.intermediate", "got 48", "multiple of 32"});
}
TEST(PrepareDesc, NonPositiveSizesAreRejected) {
  LayerDesc d = small_desc();
  d.hidden = 0;
  expect_bad_desc(d, {"desc.hidden", "got 0"});
  d = small_desc();
  d.intermediate = -16;
  expect_bad_desc(d, {"desc.intermediate", "got -16"});
  d = small_desc();
  d.num_experts = 0;
  expect_bad_desc(d, {"desc.num_experts", "got 0"});
}
TEST(PrepareDesc, TopKOutsideOneToExpertsIsRejected) {
  LayerDesc d = small_desc();
  d.top_k = 0;
  expect_bad_desc(d, {"desc.top_k", "got 0", "[1, num_experts = 4]"});
  d.top_k = 5;
  expect_bad_desc(d, {"desc.top_k", "got 5"});
}
TEST(PrepareDesc, W4A4WithMxfp4WeightsIsRejected) {
  LayerDesc d = small_desc(WeightFormat::mxfp4, ActQuant::nvfp4);
  expect_bad_desc(d, {"desc.act_quant", "mxfp4"});
}
TEST(PrepareDesc, GroupedRoutingParametersAreChecked) {
  LayerDesc d = small_desc();
  d.num_experts = 8;
  d.routing.method = RoutingMethod::sigmoid_grouped;
  d.routing.n_group = 3;
  expect_bad_desc(d, {"desc.routing.n_group", "got 3"});
  d.routing.n_group = 4;
  d.routing.topk_group = 5;
  expect_bad_desc(d, {"desc.routing.topk_group", "got 5"});
  d.routing.topk_group = 0;
  expect_bad_desc(d, {"desc.routing.topk_group", "got 0"});
  d.routing.topk_group = 1;  // 1 group of 2 experts cannot hold top_k = 4
  d.top_k = 4;
  expect_bad_desc(d, {"top_k", "got 4", "= 2"});
  d.routing.topk_group = 2;
  d.routing.routed_scaling_factor = std::numeric_limits<float>::quiet_NaN();
  expect_bad_desc(d, {"desc.routing.routed_scaling_factor"});
}
TEST(PrepareDesc, SoftmaxIgnoresGroups) {
  LayerDesc d = small_desc();
  d.routing.n_group = 3;  // would not divide E = 4, but softmax has no groups
  EXPECT_NO_THROW(detail::validate_desc("x", d));
}
TEST(PrepareDesc, BadSwigluLimitIsRejected) {
  LayerDesc d = small_desc(WeightFormat::mxfp4);
  d.swiglu_limit = -1.0f;
  expect_bad_desc(d, {"desc.swiglu_limit", "got -1"});
}
TEST(PrepareDesc, UnknownEnumValueIsRejected) {
  LayerDesc d = small_desc();
  d.weight_format = WeightFormat(7);
  expect_bad_desc(d, {"desc.weight_format", "got 7"});
}

// ---------------------------------------------------------------------------
// Tensor checks: one per bad input
// ---------------------------------------------------------------------------
TEST(PrepareTensor, MissingW13IsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13 = TensorView{};
  expect_bad(c, w, {"w13", "got nothing", "need u8[4, 64, 32]"});
}
TEST(PrepareTensor, WrongW13ShapeIsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13 = TensorView::of(c.w13.data(), DType::u8, {4, 32, 64});
  expect_bad(c, w, {"w13", "got u8[4, 32, 64]", "need u8[4, 64, 32]"});
}
TEST(PrepareTensor, WrongW13DtypeIsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13.dtype = DType::bf16;
  expect_bad(c, w, {"w13", "got bf16[4, 64, 32]"});
}
TEST(PrepareTensor, WrongW2ShapeIsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w2 = TensorView::of(c.w2.data(), DType::u8, {4, 64, 8});
  expect_bad(c, w, {"w2:", "got u8[4, 64, 8]", "need u8[4, 64, 16]"});
}
TEST(PrepareTensor, WrongScaleShapesAreRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13_scale = TensorView::of(c.w13_scale.data(), DType::e4m3, {4, 64, 2});  // H/32, not H/16
  expect_bad(c, w, {"w13_scale", "need e4m3|u8[4, 64, 4]"});
  w = c.views();
  w.w2_scale = TensorView::of(c.w2_scale.data(), DType::e4m3, {4, 32, 2});
  expect_bad(c, w, {"w2_scale", "need e4m3|u8[4, 64, 2]"});
}
TEST(PrepareTensor, E8m0ScalesForNvfp4AreRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13_scale.dtype = DType::e8m0;
  expect_bad(c, w, {"w13_scale", "got e8m0"});
}
TEST(PrepareTensor, E4m3ScalesForMxfp4AreRejected) {
  const Ckpt c = make_ckpt(small_desc(WeightFormat::mxfp4));
  CheckpointWeights w = c.views();
  w.w2_scale.dtype = DType::e4m3;
  expect_bad(c, w, {"w2_scale", "got e4m3", "need e8m0|u8"});
}
TEST(PrepareTensor, MissingScale2ForNvfp4IsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13_scale_2 = TensorView{};
  expect_bad(c, w, {"w13_scale_2", "got nothing", "need f32[4]"});
  w = c.views();
  w.w2_scale_2 = TensorView{};
  expect_bad(c, w, {"w2_scale_2", "got nothing"});
}
TEST(PrepareTensor, Scale2ForMxfp4IsRejected) {
  const Ckpt c = make_ckpt(small_desc(WeightFormat::mxfp4));
  CheckpointWeights w = c.views();
  w.w13_scale_2 = TensorView::of(c.w13_scale_2.data(), DType::f32, {4});
  expect_bad(c, w, {"w13_scale_2", "need nothing", "MXFP4"});
}
TEST(PrepareTensor, MissingInputScalesForW4A4AreRejected) {
  const Ckpt c = make_ckpt(small_desc(WeightFormat::nvfp4, ActQuant::nvfp4));
  CheckpointWeights w = c.views();
  w.w13_input_scale = TensorView{};
  expect_bad(c, w, {"w13_input_scale", "got nothing"});
  w = c.views();
  w.w2_input_scale = TensorView{};
  expect_bad(c, w, {"w2_input_scale", "got nothing"});
}
TEST(PrepareTensor, WrongBiasShapeOrDtypeIsRejected) {
  const Ckpt c = make_ckpt(small_desc(WeightFormat::mxfp4), 0, true);
  CheckpointWeights w = c.views();
  w.w13_bias = TensorView::of(c.w13_bias.data(), DType::bf16, {4, 32});
  expect_bad(c, w, {"w13_bias", "got bf16[4, 32]", "need bf16|f32[4, 64]"});
  w = c.views();
  w.w2_bias.dtype = DType::f16;
  expect_bad(c, w, {"w2_bias", "got f16[4, 64]"});
}
TEST(PrepareTensor, NonContiguousWeightIsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w2.stride[1] = 1;  // column-major inside each expert: the same bytes, transposed
  w.w2.stride[2] = 64;
  expect_bad(c, w, {"w2:", "contiguous", "strides"});
}
TEST(PrepareTensor, NullDataPointerIsRejected) {
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w13_scale.data = nullptr;
  expect_bad(c, w, {"w13_scale", "null pointer"});
}
TEST(PrepareTensor, CudaTensorWithoutCudaBuildIsUnsupported) {
#if defined(FP4MOE_WITH_CUDA)
  GTEST_SKIP() << "this build copies CUDA tensors";
#else
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w2.device = DeviceType::cuda;
  expect_bad(c, w, {"w2:", "on cuda:0", "no CUDA"}, ErrorKind::unsupported);
#endif
}
TEST(PrepareTensor, CudaLabelOnHostMemoryOrAbsentDeviceIsNamed) {
#if !defined(FP4MOE_WITH_CUDA)
  GTEST_SKIP() << "this build rejects every CUDA tensor (CudaTensorWithoutCudaBuildIsUnsupported)";
#else
  // A host buffer labelled cuda:0 (no GPU: no such device; a GPU: not its memory), and one on a
  // device id past the machine's: named errors, not the copy's CUDA error (v65).
  const Ckpt c = make_ckpt(small_desc());
  CheckpointWeights w = c.views();
  w.w2.device = DeviceType::cuda;
  expect_bad(c, w, {"w2:", "on cuda:0"});
  try {
    detail::prepare_host_weights(c.d, w);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("present CUDA device") != std::string::npos || m.find("over all its bytes") != std::string::npos)
        << m;
  }
  w.w2.device_id = 4096;
  expect_bad(c, w, {"w2:", "on cuda:4096", "present CUDA device"});
#endif
}

// ---------------------------------------------------------------------------
// NaN / Inf in weights, reported with the tensor and the first bad index
// ---------------------------------------------------------------------------
TEST(PrepareNaN, E4m3NaNScaleInW13ScaleIsReportedAtItsCheckpointIndex) {
  Ckpt c = make_ckpt(small_desc());
  c.w13_scale[size_t((2 * 64 + 37) * 4 + 3)] = 0xFF;  // expert 2, row 37, block 3
  c.w13_scale[size_t((3 * 64 + 1) * 4 + 0)] = 0x7F;   // a later one
  expect_bad(c, c.views(), {"w13_scale", "0xFF", "[2, 37, 3]"});
}
TEST(PrepareNaN, InterleavedW13ScaleNaNIsReportedInCheckpointRows) {
  LayerDesc d = small_desc(WeightFormat::mxfp4);
  d.gate_up = GateUpLayout::interleaved;
  Ckpt c = make_ckpt(d);
  c.w13_scale[size_t((1 * 64 + 5) * 2 + 1)] = 0xFF;  // expert 1, checkpoint row 5 (up_2), block 1
  expect_bad(c, c.views(), {"w13_scale", "0xFF", "[1, 5, 1]", "e8m0"});
}
TEST(PrepareNaN, E4m3NaNScaleInW2ScaleIsReported) {
  Ckpt c = make_ckpt(small_desc());
  c.w2_scale[size_t((0 * 64 + 63) * 2 + 1)] = 0x7F;
  expect_bad(c, c.views(), {"w2_scale", "0x7F", "[0, 63, 1]"});
}
TEST(PrepareNaN, E8m0NaNScaleIsReported) {
  Ckpt c = make_ckpt(small_desc(WeightFormat::mxfp4));
  c.w2_scale[size_t((3 * 64 + 10) * 1 + 0)] = 0xFF;
  expect_bad(c, c.views(), {"w2_scale", "0xFF", "[3, 10, 0]"});
}
TEST(PrepareNaN, NonFiniteOrNonPositiveScale2IsReported) {
  Ckpt c = make_ckpt(small_desc());
  c.w13_scale_2[2] = std::numeric_limits<float>::quiet_NaN();
  expect_bad(c, c.views(), {"w13_scale_2", "nan at [2]"});
  c = make_ckpt(small_desc());
  c.w2_scale_2[1] = std::numeric_limits<float>::infinity();
  expect_bad(c, c.views(), {"w2_scale_2", "inf at [1]"});
  c = make_ckpt(small_desc());
  c.w2_scale_2[3] = 0.0f;
  expect_bad(c, c.views(), {"w2_scale_2", "0 at [3]", "> 0"});
}
TEST(PrepareNaN, NonFiniteInputScaleIsReported) {
  Ckpt c = make_ckpt(small_desc(WeightFormat::nvfp4, ActQuant::nvfp4));
  c.w13_in[0] = -std::numeric_limits<float>::infinity();
  expect_bad(c, c.views(), {"w13_input_scale", "-inf at [0]"});
  c = make_ckpt(small_desc(WeightFormat::nvfp4, ActQuant::nvfp4));
  c.w2_in[3] = std::numeric_limits<float>::quiet_NaN();
  expect_bad(c, c.views(), {"w2_input_scale", "nan at [3]"});
}
TEST(PrepareNaN, NonFiniteBiasIsReported) {
  Ckpt c = make_ckpt(small_desc(WeightFormat::mxfp4), 0, true);
  c.w13_bias[size_t(1 * 64 + 9)] = 0x7FC0;  // bf16 NaN
  expect_bad(c, c.views(), {"w13_bias", "nan at [1, 9]"});
  c = make_ckpt(small_desc(WeightFormat::mxfp4), 0, true);
  c.w2_bias[size_t(2 * 64 + 33)] = 0xFF80;  // bf16 -inf
  expect_bad(c, c.views(), {"w2_bias", "-inf at [2, 33]"});
}

}  // namespace
}  // namespace fp4moe

// prepare against the fixtures' HostWeights, which are built directly in canonical form
// (tests/moe_fixtures.cpp) and only then written out in checkpoint layout.
#include "moe_fixtures.hpp"

namespace fp4moe {
namespace {

class PrepareMatchesFixture : public ::testing::TestWithParam<testing::MoECase> {};

TEST_P(PrepareMatchesFixture, EveryCanonicalFieldIsBitExact) {
  testing::MoECase c = GetParam();
  c.seed = std::random_device{}();
  const testing::MoEProblem p = testing::make_problem(c);
  auto hw = detail::prepare_host_weights(p.desc, p.weights);
  const detail::HostWeights& want = *p.host;
  EXPECT_EQ(hw->num_local, want.num_local);
  EXPECT_EQ(hw->block, want.block);
  EXPECT_EQ(hw->w13, want.w13);
  EXPECT_EQ(hw->w13_scale, want.w13_scale);
  EXPECT_EQ(hw->w2, want.w2);
  EXPECT_EQ(hw->w2_scale, want.w2_scale);
  EXPECT_EQ(hw->w13_dq, want.w13_dq);
  EXPECT_EQ(hw->w2_dq, want.w2_dq);
  EXPECT_EQ(hw->a13_dq, want.a13_dq);
  EXPECT_EQ(hw->a2_dq, want.a2_dq);
  EXPECT_EQ(hw->w13_bias, want.w13_bias);
  EXPECT_EQ(hw->w2_bias, want.w2_bias);
  EXPECT_EQ(hw->expert_map, want.expert_map);
}

testing::MoECase fixture_case(const char* name, WeightFormat wf, ActQuant aq, GateUpLayout gu, bool bias,
                              int64_t E_local) {
  testing::MoECase c;
  c.name = name;
  c.H = wf == WeightFormat::nvfp4 ? 48 : 64;
  c.I = 32;
  c.E = 6;
  c.k = 2;
  c.T = 3;
  c.wf = wf;
  c.aq = aq;
  c.act = wf == WeightFormat::mxfp4 ? Activation::swiglu_oai : Activation::silu;
  c.gate_up = gu;
  c.bias = bias;
  c.E_local = E_local;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PrepareMatchesFixture,
    ::testing::Values(
        fixture_case("nvfp4_w4a16", WeightFormat::nvfp4, ActQuant::none, GateUpLayout::concat, false, 0),
        fixture_case("nvfp4_w4a4_ep", WeightFormat::nvfp4, ActQuant::nvfp4, GateUpLayout::concat, false, 4),
        fixture_case("nvfp4_interleaved_bias", WeightFormat::nvfp4, ActQuant::none, GateUpLayout::interleaved,
                     true, 0),
        fixture_case("mxfp4_interleaved_bias_ep", WeightFormat::mxfp4, ActQuant::none, GateUpLayout::interleaved,
                     true, 3),
        fixture_case("mxfp4_concat", WeightFormat::mxfp4, ActQuant::none, GateUpLayout::concat, false, 0)),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace fp4moe
