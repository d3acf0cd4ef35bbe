// The public API: tensors, enum names, Layer (through the reference backend), route(),
// and the bad-input contract of SPEC §6: one test per bad input, each asserting the
// error kind, that the message names the argument, and that the output is untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#if defined(FP4MOE_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include "api/validate.hpp"
#include "error_test_util.hpp"
#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "moe_fixtures.hpp"
#include "reference/reference.hpp"

namespace fp4moe {
namespace {

using testing::error_of;

template <class F>
void expect_error(F&& f, ErrorKind kind, std::initializer_list<const char*> needles) {
  const std::string m = error_of(f, kind);
  for (const char* n : needles) EXPECT_NE(m.find(n), std::string::npos) << "missing '" << n << "' in: " << m;
}

uint64_t fresh_seed() { return std::random_device{}(); }

// ---------------------------------------------------------------------------
// Tensors and names
// ---------------------------------------------------------------------------
TEST(ApiTensor, OfBuildsARowMajorView) {
  int x = 0;
  const TensorView t = TensorView::of(&x, DType::bf16, {4, 7168}, DeviceType::cuda, 1);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.stride[0], 7168);
  EXPECT_EQ(t.stride[1], 1);
  EXPECT_EQ(t.numel(), 4 * 7168);
  EXPECT_EQ(t.nbytes(), size_t(4 * 7168 * 2));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.describe(), "bf16[4, 7168] on cuda:1");
  const TensorView v = TensorView::of(&x, DType::u8, std::vector<int64_t>{2, 3, 5});
  EXPECT_EQ(v.stride[0], 15);
  EXPECT_EQ(v.describe(), "u8[2, 3, 5] on cpu");
}

TEST(ApiTensor, OfRejectsTooManyDimsAndNegativeExtents) {
  int x = 0;
  expect_error([&] { TensorView::of(&x, DType::u8, {1, 2, 3, 4, 5}); }, ErrorKind::invalid_argument,
               {"shape", "5 dims"});
  expect_error([&] { TensorView::of(&x, DType::u8, {3, -1}); }, ErrorKind::invalid_argument, {"shape[1]", "-1"});
}

TEST(ApiTensor, ContiguityFollowsStridesAndIgnoresUnitDims) {
  int x = 0;
  TensorView t = TensorView::of(&x, DType::f32, {3, 1, 4});
  t.stride[1] = 99;  // extent 1: any stride is row-major
  EXPECT_TRUE(t.is_contiguous());
  t.stride[2] = 2;
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_NE(t.describe().find("strides [4, 99, 2]"), std::string::npos) << t.describe();
  TensorView empty = TensorView::of(&x, DType::f32, {0, 4});
  empty.stride[0] = 7;
  EXPECT_TRUE(empty.is_contiguous());
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(TensorView{}.describe(), "nothing");
  EXPECT_EQ(TensorView{}.numel(), 0);
  TensorView scalar = TensorView::of(&x, DType::i32, std::vector<int64_t>{});
  EXPECT_EQ(scalar.numel(), 1);
}

TEST(ApiTensor, DtypeNamesAndSizes) {
  const std::pair<DType, std::pair<const char*, size_t>> all[] = {
      {DType::u8, {"u8", 1}},   {DType::e4m3, {"e4m3", 1}}, {DType::e8m0, {"e8m0", 1}}, {DType::i32, {"i32", 4}},
      {DType::f32, {"f32", 4}}, {DType::f16, {"f16", 2}},   {DType::bf16, {"bf16", 2}}};
  for (const auto& [t, ns] : all) {
    EXPECT_STREQ(dtype_name(t), ns.first);
    EXPECT_EQ(dtype_size(t), ns.second);
  }
}

TEST(ApiTensor, EnumNames) {
  EXPECT_STREQ(to_string(WeightFormat::nvfp4), "nvfp4");
  EXPECT_STREQ(to_string(WeightFormat::mxfp4), "mxfp4");
  EXPECT_STREQ(to_string(ActQuant::none), "none");
  EXPECT_STREQ(to_string(ActQuant::nvfp4), "nvfp4");
  EXPECT_STREQ(to_string(Activation::silu), "silu");
  EXPECT_STREQ(to_string(Activation::swiglu_oai), "swiglu_oai");
  EXPECT_STREQ(to_string(GateUpLayout::concat), "concat");
  EXPECT_STREQ(to_string(GateUpLayout::interleaved), "interleaved");
  EXPECT_STREQ(to_string(RoutingMethod::softmax), "softmax");
  EXPECT_STREQ(to_string(RoutingMethod::sigmoid_grouped), "sigmoid_grouped");
  EXPECT_GT(std::strlen(version()), 0u);
}

TEST(ApiTensor, ExtremeExtentsNeitherOverflowNorCount) {
  // Views a caller may pass with any extents: no arithmetic on them overflows (UBSan, v65), a
  // negative extent holds nothing, and counts past int64 / size_t saturate.
  int x = 0;
  TensorView t = TensorView::of(&x, DType::f32, {2, 3});
  t.shape[0] = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(t.numel(), 0);
  EXPECT_NE(t.describe().find(std::to_string(std::numeric_limits<int64_t>::min())), std::string::npos);
  t.shape[0] = int64_t(1) << 62;
  t.shape[1] = 4;
  EXPECT_EQ(t.numel(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.nbytes(), std::numeric_limits<size_t>::max());
  t.shape[0] = 4;  // row-major, though the extents' product is past int64
  t.shape[1] = int64_t(1) << 62;
  t.stride[0] = int64_t(1) << 62;
  EXPECT_TRUE(t.is_contiguous());  // (the product past the outer dim is never needed)
  TensorView u = TensorView::of(&x, DType::u8, {2, 2, 2});
  u.shape[1] = u.shape[2] = int64_t(1) << 40;  // (1 << 80) would be the outer stride
  u.stride[1] = int64_t(1) << 40;
  u.stride[0] = 12345;
  EXPECT_FALSE(u.is_contiguous());
  EXPECT_EQ(TensorView::of(&x, DType::bf16, {3, 0, 5}).numel(), 0);
}

TEST(ApiValidate, MisalignedCudaPointerIsRejected) {
  TensorView t = TensorView::of(reinterpret_cast<void*>(0x10008), DType::bf16, {4, 64}, DeviceType::cuda, 0);
  expect_error([&] { detail::expect_tensor("entry", "x", t, DType::bf16, {4, 64}, detail::Place::cuda(0)); },
               ErrorKind::invalid_argument, {"entry: x:", "aligned to 16 bytes"});
  t.data = reinterpret_cast<void*>(0x10010);
  EXPECT_NO_THROW(detail::expect_tensor("entry", "x", t, DType::bf16, {4, 64}, detail::Place::cuda(0)));
  // the CPU needs the element's alignment only
  TensorView c = TensorView::of(reinterpret_cast<void*>(0x10008), DType::bf16, {4, 64});
  EXPECT_NO_THROW(detail::expect_tensor("entry", "x", c, DType::bf16, {4, 64}, detail::Place::cpu()));
}

// Whether the device reads pageable host memory (HMM, ATS): there a host buffer labelled cuda is
// memory its kernels reach. False without a GPU or a CUDA build.
bool device_reads_host_memory() {
#if defined(FP4MOE_WITH_CUDA)
  int pageable = 0;
  if (cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return pageable != 0;
#else
  return false;
#endif
}

// A host buffer labelled cuda fails naming its argument after the call's other checks (no GPU:
// the runtime cannot place the pointer; a GPU: host memory), unless the device reads pageable
// host memory. Empty, absent and CPU tensors are not looked at. The GPU suite runs the layer on
// pinned, managed and host memory (CudaLayer.ForwardTakesOnlyMemoryItsDeviceReaches).
TEST(ApiValidate, MemoryLabelledCudaMustBeDeviceMemory) {
  alignas(16) float host[3 * 8] = {};
  alignas(16) float w[3 * 2] = {};
  alignas(16) int32_t ids[3 * 2] = {};
  const TensorView t = TensorView::of(host, DType::f32, {3, 8}, DeviceType::cuda, 0);
  const TensorView empty = TensorView::of(host, DType::f32, {0, 8}, DeviceType::cuda, 0);
  const TensorView cpu = TensorView::of(host, DType::f32, {3, 8});
  const TensorView absent;
  EXPECT_NO_THROW(detail::expect_device_pointers("entry", {{"e", &empty}, {"c", &cpu}, {"a", &absent}}));
  RouteArgs a;
  a.router_logits = t;
  a.topk_weights = TensorView::of(w, DType::f32, {3, 2}, DeviceType::cuda, 0);
  a.topk_ids = TensorView::of(ids, DType::i32, {3, 2}, DeviceType::cuda, 0);
  a.top_k = 2;
#if defined(FP4MOE_WITH_CUDA)
  if (device_reads_host_memory()) {
    EXPECT_NO_THROW(detail::expect_device_pointers("entry", {{"x", &t}}));
  } else {
    expect_error([&] { detail::expect_device_pointers("entry", {{"e", &empty}, {"x", &t}}); },
                 ErrorKind::invalid_argument, {"entry: x: got f32[3, 8] on cuda:0 at 0x", "can reach over all its bytes"});
    // route: its other checks pass, then the pointers fail, the logits first
    expect_error([&] { route(a); }, ErrorKind::invalid_argument, {"route: router_logits: got", "can reach"});
    a.topk_weights.shape[1] = 3;  // a shape error is named before any pointer is looked at
    expect_error([&] { route(a); }, ErrorKind::invalid_argument, {"route: topk_weights: got f32[3, 3]"});
  }
#else
  expect_error([&] { detail::expect_device_pointers("entry", {{"x", &t}}); }, ErrorKind::unsupported,
               {"entry: x:", "this build has no CUDA"});
#endif
}

TEST(ApiValidate, HostPointerMisalignedForItsElementIsRejected) {
  // A misaligned f32 on the host was read as f32 (undefined; UBSan in the reference, v65).
  TensorView c = TensorView::of(reinterpret_cast<void*>(0x10002), DType::f32, {4, 8});
  expect_error([&] { detail::expect_tensor("entry", "w", c, DType::f32, {4, 8}, detail::Place::cpu()); },
               ErrorKind::invalid_argument, {"entry: w:", "aligned to 4 bytes"});
  c.data = reinterpret_cast<void*>(0x10004);
  EXPECT_NO_THROW(detail::expect_tensor("entry", "w", c, DType::f32, {4, 8}, detail::Place::cpu()));
  // prepare's checkpoint tensors (anywhere) may sit unaligned in a safetensors file: read by memcpy
  c.data = reinterpret_cast<void*>(0x10001);
  EXPECT_NO_THROW(detail::expect_tensor("entry", "w", c, DType::f32, {4, 8}, detail::Place::anywhere()));
}

TEST(ApiValidate, ExtentsPastInt64BytesAreRejected) {
  int x = 0;
  TensorView t = TensorView::of(&x, DType::bf16, {4, 64});
  t.shape[0] = int64_t(1) << 60;  // 2^67 bytes
  t.stride[0] = 64;
  expect_error([&] { detail::expect_tensor("entry", "h", t, DType::bf16, {detail::kAnyExtent, 64}, detail::Place::cpu()); },
               ErrorKind::invalid_argument, {"entry: h:", "at most 2^63 - 1 bytes"});
}

TEST(ApiValidate, MessageHasTheSpecShape) {
  int x = 0;
  const TensorView t = TensorView::of(&x, DType::f32, {4, 8});
  const std::string m = error_of(
      [&] { detail::expect_tensor("Layer::forward", "topk_ids", t, DType::i32, {4, 8}, detail::Place::cpu()); },
      ErrorKind::invalid_argument);
  EXPECT_EQ(m, "Layer::forward: topk_ids: got f32[4, 8] on cpu, need i32[4, 8] on cpu");
}

TEST(ApiValidate, WrongCudaDeviceIdIsRejected) {
  const TensorView t = TensorView::of(reinterpret_cast<void*>(0x10000), DType::f32, {4}, DeviceType::cuda, 1);
  expect_error([&] { detail::expect_tensor("e", "x", t, DType::f32, {4}, detail::Place::cuda(0)); },
               ErrorKind::invalid_argument, {"e: x:", "on cuda:1", "need f32[4] on cuda:0"});
}

// ---------------------------------------------------------------------------
// Layer: a small NVFP4 layer on the reference backend, with poisoned outputs
// ---------------------------------------------------------------------------
constexpr uint16_t kPoison = 0x7FBF;  // a bf16 NaN no computation writes

testing::MoECase small_case(int64_t T = 5) { return testing::small_api_case("api", T, fresh_seed()); }

PrepareOptions on_reference() {
  PrepareOptions o;
  o.backend = "reference";
  return o;
}

struct Forward {
  testing::MoEProblem p;
  Layer layer;
  std::vector<uint16_t> out;
  std::vector<uint8_t> ws;

  explicit Forward(const testing::MoECase& c)
      : p(testing::make_problem(c)), layer(Layer::prepare(p.desc, p.weights, on_reference())),
        out(size_t(c.T * c.H), kPoison), ws(layer.workspace_size(c.T)) {}

  ForwardArgs args() {
    ForwardArgs a;
    a.hidden_states = p.hidden_view();
    a.topk_weights = p.topk_weights_view();
    a.topk_ids = p.topk_ids_view();
    a.out = TensorView::of(out.data(), DType::bf16, {p.c.T, p.c.H});
    a.workspace = TensorView::of(ws.data(), DType::u8, {int64_t(ws.size())});
    return a;
  }
  bool out_untouched() const {
    for (uint16_t v : out)
      if (v != kPoison) return false;
    return true;
  }
  // The call must fail with `kind`, name every needle, and leave out as it was.
  void expect_rejected(const ForwardArgs& a, std::initializer_list<const char*> needles,
                       ErrorKind kind = ErrorKind::invalid_argument) {
    expect_error([&] { layer.forward(a); }, kind, needles);
    EXPECT_TRUE(out_untouched());
  }
};

TEST(ApiLayer, AccessorsDescribeThePreparedLayer) {
  Forward f(small_case());
  EXPECT_EQ(f.layer.backend(), "reference");
  EXPECT_FALSE(f.layer.selection_reason().empty());
  EXPECT_EQ(f.layer.device(), DeviceType::cpu);
  EXPECT_EQ(f.layer.num_local_experts(), 4);
  EXPECT_EQ(f.layer.desc().hidden, 64);
  EXPECT_EQ(f.layer.desc().top_k, 2);
  EXPECT_GT(f.layer.workspace_size(5), 0u);
  expect_error([&] { f.layer.workspace_size(-1); }, ErrorKind::invalid_argument, {"num_tokens", "got -1"});
}

TEST(ApiLayer, ForwardEqualsReferenceOnIndependentHostWeightsBitExact) {
  for (DType out_dtype : {DType::bf16, DType::f32, DType::f16}) {
    testing::MoECase c = small_case(7);
    c.routing = testing::Routing::with_invalid;
    Forward f(c);
    std::vector<uint8_t> out(size_t(c.T * c.H) * dtype_size(out_dtype), 0xA5);
    ForwardArgs a = f.args();
    a.out = TensorView::of(out.data(), out_dtype, {c.T, c.H});
    f.layer.forward(a);
    const std::vector<float> want = testing::run_reference(f.p, out_dtype);
    for (int64_t i = 0; i < c.T * c.H; ++i) {
      const float got = detail::read_activation(out.data(), out_dtype, i);
      ASSERT_EQ(std::memcmp(&got, &want[size_t(i)], 4), 0) << dtype_name(out_dtype) << " element " << i << ": " << got << " vs " << want[size_t(i)];
    }
  }
}

TEST(ApiLayer, ForwardAccumulatesAndAppliesRouterWeightOnInput) {
  testing::MoECase c = small_case(6);
  c.k = 1;
  c.accumulate = true;
  c.router_weight_on_input = true;
  Forward f(c);
  std::vector<uint16_t> out = f.p.out_init;
  ForwardArgs a = f.args();
  a.out = TensorView::of(out.data(), DType::bf16, {c.T, c.H});
  a.accumulate = true;
  a.apply_router_weight_on_input = true;
  f.layer.forward(a);
  const std::vector<float> want = testing::run_reference(f.p, DType::bf16);
  EXPECT_EQ(testing::bf16_to_float(out), want);
}

TEST(ApiLayer, PreparedFromInterleavedMxfp4WithExpertMapMatchesReference) {
  testing::MoECase c = small_case(9);
  c.wf = WeightFormat::mxfp4;
  c.act = Activation::swiglu_oai;
  c.gate_up = GateUpLayout::interleaved;
  c.bias = true;
  c.E = 6;
  c.E_local = 3;
  Forward f(c);
  f.layer.forward(f.args());
  EXPECT_EQ(testing::bf16_to_float(f.out), testing::run_reference(f.p, DType::bf16));
}

TEST(ApiLayer, ZeroTokensIsANoOp) {
  Forward f(small_case(0));
  ForwardArgs a;
  a.hidden_states = TensorView::of(nullptr, DType::bf16, {0, 64});
  a.topk_weights = TensorView::of(nullptr, DType::f32, {0, 2});
  a.topk_ids = TensorView::of(nullptr, DType::i32, {0, 2});
  a.out = TensorView::of(nullptr, DType::bf16, {0, 64});
  a.workspace = TensorView::of(f.ws.data(), DType::u8, {int64_t(f.ws.size())});
  EXPECT_NO_THROW(f.layer.forward(a));
}

TEST(ApiLayer, MovedFromLayerThrowsInsteadOfCrashing) {
  Forward f(small_case());
  Layer other = std::move(f.layer);
  EXPECT_EQ(other.backend(), "reference");
  expect_error([&] { f.layer.forward(f.args()); }, ErrorKind::invalid_argument, {"moved"});
  expect_error([&] { (void)f.layer.backend(); }, ErrorKind::invalid_argument, {"moved"});
}

TEST(ApiLayer, PrepareWithUnknownBackendFails) {
  const testing::MoEProblem p = testing::make_problem(small_case());
  PrepareOptions o;
  o.backend = "nope";
  expect_error([&] { Layer::prepare(p.desc, p.weights, o); }, ErrorKind::invalid_argument, {"'nope'", "reference"});
}

// --- bad forward inputs, one per test ---------------------------------------------------
TEST(ApiForwardBad, HiddenStatesMissing) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states = TensorView{};
  f.expect_rejected(a, {"hidden_states", "got nothing"});
}
TEST(ApiForwardBad, HiddenStatesWrongShape) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states = TensorView::of(f.p.x.data(), DType::bf16, {10, 32});
  f.expect_rejected(a, {"hidden_states", "got bf16[10, 32]", "need bf16|f16|f32[*, 64]"});
}
TEST(ApiForwardBad, HiddenStatesWrongRank) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states = TensorView::of(f.p.x.data(), DType::bf16, {1, 5, 64});
  f.expect_rejected(a, {"hidden_states", "got bf16[1, 5, 64]"});
}
TEST(ApiForwardBad, HiddenStatesWrongDtype) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states.dtype = DType::i32;
  f.expect_rejected(a, {"hidden_states", "got i32[5, 64]"});
}
TEST(ApiForwardBad, HiddenStatesOnCuda) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states.device = DeviceType::cuda;
  f.expect_rejected(a, {"hidden_states", "on cuda:0", "on cpu"});
}
TEST(ApiForwardBad, HiddenStatesNonContiguous) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states.stride[0] = 128;  // every other row of a [10, 64] buffer...
  a.hidden_states.shape[0] = 2;     // ...that stays inside x
  a.topk_weights.shape[0] = a.topk_ids.shape[0] = a.out.shape[0] = 2;
  f.expect_rejected(a, {"hidden_states", "contiguous", "strides [128, 1]"});
}
TEST(ApiForwardBad, HiddenStatesNullPointer) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states.data = nullptr;
  f.expect_rejected(a, {"hidden_states", "null pointer"});
}
TEST(ApiForwardBad, TopkWeightsMisaligned) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  std::vector<uint8_t> shifted(f.p.topk_weights.size() * 4 + 8);
  std::memcpy(shifted.data() + 2, f.p.topk_weights.data(), f.p.topk_weights.size() * 4);
  a.topk_weights.data = shifted.data() + 2;  // (vector storage is aligned: + 2 is not, for f32)
  f.expect_rejected(a, {"topk_weights", "aligned to 4 bytes"});
}
TEST(ApiForwardBad, HiddenStatesTokensPastInt64Bytes) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.hidden_states.shape[0] = int64_t(1) << 60;
  f.expect_rejected(a, {"hidden_states", "at most 2^63 - 1 bytes"});
}
TEST(ApiForwardBad, TopkWeightsWrongDtype) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.topk_weights.dtype = DType::bf16;
  f.expect_rejected(a, {"topk_weights", "got bf16[5, 2]", "need f32[5, 2]"});
}
TEST(ApiForwardBad, TopkWeightsWrongShape) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.topk_weights = TensorView::of(f.p.topk_weights.data(), DType::f32, {5, 1});
  f.expect_rejected(a, {"topk_weights", "got f32[5, 1]", "need f32[5, 2]"});
}
TEST(ApiForwardBad, TopkIdsWrongDtype) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.topk_ids.dtype = DType::f32;
  f.expect_rejected(a, {"topk_ids", "got f32[5, 2]", "need i32[5, 2]"});
}
TEST(ApiForwardBad, TopkIdsWrongTokenCount) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.topk_ids = TensorView::of(f.p.topk_ids.data(), DType::i32, {4, 2});
  f.expect_rejected(a, {"topk_ids", "got i32[4, 2]", "need i32[5, 2]"});
}
TEST(ApiForwardBad, TopkIdsMissing) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.topk_ids = TensorView{};
  f.expect_rejected(a, {"topk_ids", "got nothing"});
}
TEST(ApiForwardBad, TopkIdEqualToNumExperts) {
  Forward f(small_case());
  f.p.topk_ids[2 * 2 + 1] = 4;  // token 2, slot 1
  f.expect_rejected(f.args(), {"topk_ids", "got 4 at [2, 1]", "-1 or an expert in [0, 4)"});
}
TEST(ApiForwardBad, TopkIdMinusTwo) {
  Forward f(small_case());
  f.p.topk_ids[4 * 2 + 0] = -2;
  f.expect_rejected(f.args(), {"topk_ids", "got -2 at [4, 0]"});
}
TEST(ApiForwardBad, TopkIdMinusOneIsAccepted) {
  Forward f(small_case());
  for (int32_t& id : f.p.topk_ids) id = -1;
  ForwardArgs a = f.args();
  f.layer.forward(a);
  for (uint16_t v : f.out) ASSERT_EQ(bf16_to_f32(v), 0.0f);  // no expert: exactly 0
}
TEST(ApiForwardBad, OutWrongShape) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.out = TensorView::of(f.out.data(), DType::bf16, {5, 32});
  f.expect_rejected(a, {"out", "got bf16[5, 32]", "need bf16|f16|f32[5, 64]"});
}
TEST(ApiForwardBad, OutWrongDtype) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.out = TensorView::of(f.out.data(), DType::u8, {5, 64});
  f.expect_rejected(a, {"out", "got u8[5, 64]"});
}
TEST(ApiForwardBad, OutOnCuda) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.out.device = DeviceType::cuda;
  f.expect_rejected(a, {"out", "on cuda:0"});
}
TEST(ApiForwardBad, OutMissing) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.out = TensorView{};
  f.expect_rejected(a, {"out", "got nothing"});
}
TEST(ApiForwardBad, WorkspaceTooSmall) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.workspace.shape[0] = int64_t(f.ws.size()) - 1;
  const std::string need = "need u8[>= " + std::to_string(f.ws.size()) + "]";
  f.expect_rejected(a, {"workspace", need.c_str()});
}
TEST(ApiForwardBad, WorkspaceMissing) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.workspace = TensorView{};
  f.expect_rejected(a, {"workspace", "got nothing"});
}
TEST(ApiForwardBad, WorkspaceWrongDtype) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.workspace.dtype = DType::f32;
  f.expect_rejected(a, {"workspace", "got f32"});
}
TEST(ApiForwardBad, WorkspaceTwoDimensional) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.workspace = TensorView::of(f.ws.data(), DType::u8, {1, int64_t(f.ws.size())});
  f.expect_rejected(a, {"workspace", "need u8[*]"});
}
TEST(ApiForwardBad, RouterWeightOnInputNeedsTopKOne) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  a.apply_router_weight_on_input = true;
  f.expect_rejected(a, {"apply_router_weight_on_input", "top_k = 2", "top_k == 1"});
}
TEST(ApiForwardBad, OutOverlappingHiddenStates) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  std::vector<uint16_t> both(size_t(2 * 5 * 64), kPoison);
  std::memcpy(both.data(), f.p.x.data(), f.p.x.size() * 2);
  const std::vector<uint16_t> before = both;
  a.hidden_states = TensorView::of(both.data(), DType::bf16, {5, 64});
  a.out = TensorView::of(both.data() + 64, DType::bf16, {5, 64});  // shifted by one row
  expect_error([&] { f.layer.forward(a); }, ErrorKind::invalid_argument, {"out", "overlapping hidden_states"});
  EXPECT_EQ(both, before);
}
TEST(ApiForwardBad, OutOverlappingWorkspace) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  std::vector<uint8_t> both(f.ws.size() + 5 * 64 * 2, 0x5A);
  const std::vector<uint8_t> before = both;
  a.workspace = TensorView::of(both.data(), DType::u8, {int64_t(f.ws.size())});
  a.out = TensorView::of(both.data() + f.ws.size() - 2, DType::bf16, {5, 64});
  expect_error([&] { f.layer.forward(a); }, ErrorKind::invalid_argument, {"out", "overlapping workspace"});
  EXPECT_EQ(both, before);
}
TEST(ApiForwardBad, WorkspaceOverlappingTopkIds) {
  Forward f(small_case());
  ForwardArgs a = f.args();
  std::vector<uint8_t> ws(f.ws.size() + 64);
  std::memcpy(ws.data(), f.p.topk_ids.data(), f.p.topk_ids.size() * 4);
  a.topk_ids = TensorView::of(ws.data(), DType::i32, {5, 2});
  a.workspace = TensorView::of(ws.data() + 8, DType::u8, {int64_t(f.ws.size())});
  f.expect_rejected(a, {"workspace", "overlapping topk_ids"});
}

// ---------------------------------------------------------------------------
// forward_batched
// ---------------------------------------------------------------------------
struct Batched {
  testing::MoEProblem p;
  Layer layer;
  int64_t M;
  std::vector<uint16_t> x, out;
  std::vector<int32_t> counts;
  std::vector<uint8_t> ws;

  Batched(testing::MoECase c, int64_t max_tokens)
      : p(testing::make_problem(c)), layer(Layer::prepare(p.desc, p.weights, on_reference())), M(max_tokens) {
    const int64_t EL = layer.num_local_experts(), H = c.H;
    std::mt19937 rng{uint32_t(fresh_seed())};
    std::normal_distribution<float> n(0.f, 1.f);
    x.resize(size_t(EL * M * H));
    for (uint16_t& v : x) v = bf16_from_f32(n(rng));
    out.assign(x.size(), kPoison);
    std::uniform_int_distribution<int32_t> u(0, int32_t(M));
    counts.resize(size_t(EL));
    for (int32_t& v : counts) v = u(rng);
    counts[0] = int32_t(M);
    if (EL > 1) counts[1] = 0;
    ws.resize(layer.batched_workspace_size(M));
  }
  BatchedArgs args() {
    const int64_t EL = layer.num_local_experts(), H = p.c.H;
    BatchedArgs a;
    a.hidden_states = TensorView::of(x.data(), DType::bf16, {EL, M, H});
    a.expert_num_tokens = TensorView::of(counts.data(), DType::i32, {EL});
    a.out = TensorView::of(out.data(), DType::bf16, {EL, M, H});
    a.workspace = TensorView::of(ws.data(), DType::u8, {int64_t(ws.size())});
    return a;
  }
  bool out_untouched() const {
    for (uint16_t v : out)
      if (v != kPoison) return false;
    return true;
  }
  void expect_rejected(const BatchedArgs& a, std::initializer_list<const char*> needles) {
    expect_error([&] { layer.forward_batched(a); }, ErrorKind::invalid_argument, needles);
    EXPECT_TRUE(out_untouched());
  }
};

TEST(ApiBatched, EqualsReferenceAndLeavesRowsPastCountsUntouched) {
  testing::MoECase c = small_case();
  c.E = 5;
  c.E_local = 3;
  Batched b(c, 6);
  b.layer.forward_batched(b.args());
  std::vector<uint16_t> want(b.out.size(), kPoison);
  BatchedArgs ref = b.args();
  ref.out = TensorView::of(want.data(), DType::bf16, {3, 6, c.H});
  std::vector<float> scratch(detail::reference_scratch_floats(*b.p.host));
  detail::reference_forward_batched(*b.p.host, ref, scratch.data());
  EXPECT_EQ(b.out, want);
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t r = b.counts[size_t(e)]; r < 6; ++r)
      for (int64_t i = 0; i < c.H; ++i) ASSERT_EQ(b.out[size_t((e * 6 + r) * c.H + i)], kPoison);
}

TEST(ApiBatchedBad, CountAboveMaxTokens) {
  Batched b(small_case(), 64);
  b.counts[3] = 70;
  b.expect_rejected(b.args(), {"expert_num_tokens[3] = 70 is above max_tokens 64"});
}
TEST(ApiBatchedBad, NegativeCount) {
  Batched b(small_case(), 8);
  b.counts[2] = -1;
  b.expect_rejected(b.args(), {"expert_num_tokens[2] = -1 is negative"});
}
TEST(ApiBatchedBad, CountsWrongShape) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.expert_num_tokens.shape[0] = 3;
  b.expect_rejected(a, {"expert_num_tokens", "got i32[3]", "need i32[4]"});
}
TEST(ApiBatchedBad, CountsWrongDtype) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.expert_num_tokens.dtype = DType::f32;
  b.expect_rejected(a, {"expert_num_tokens", "got f32[4]"});
}
TEST(ApiBatchedBad, HiddenWrongExpertCount) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.hidden_states = TensorView::of(b.x.data(), DType::bf16, {2, 16, 64});
  b.expect_rejected(a, {"hidden_states", "got bf16[2, 16, 64]", "need bf16|f16|f32[4, *, 64]"});
}
TEST(ApiBatchedBad, Nvfp4HiddenOnW4A16Layer) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.hidden_states = TensorView::of(b.x.data(), DType::u8, {4, 8, 32});
  b.expect_rejected(a, {"hidden_states", "got u8[4, 8, 32]", "only for W4A4"});
}
TEST(ApiBatchedBad, HiddenScaleWithFloatHidden) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.hidden_scale = TensorView::of(b.x.data(), DType::e4m3, {4, 8, 4});
  b.expect_rejected(a, {"hidden_scale", "need nothing"});
}
TEST(ApiBatchedBad, Nvfp4HiddenWithoutScale) {
  testing::MoECase c = small_case();
  c.aq = ActQuant::nvfp4;
  Batched b(c, 8);
  BatchedArgs a = b.args();
  a.hidden_states = TensorView::of(b.x.data(), DType::u8, {4, 8, 32});
  b.expect_rejected(a, {"hidden_scale", "got nothing", "need e4m3|u8[4, 8, 4]"});
}
TEST(ApiBatchedBad, OutWrongShape) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.out = TensorView::of(b.out.data(), DType::bf16, {4, 7, 64});
  b.expect_rejected(a, {"out", "got bf16[4, 7, 64]", "need bf16|f16|f32[4, 8, 64]"});
}
TEST(ApiBatchedBad, WorkspaceTooSmall) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.workspace.shape[0] = 3;
  b.expect_rejected(a, {"workspace", "got u8[3]"});
}
TEST(ApiBatchedBad, OutOverlappingHidden) {
  Batched b(small_case(), 8);
  BatchedArgs a = b.args();
  a.hidden_states.data = b.out.data();
  b.expect_rejected(a, {"out", "overlapping hidden_states"});
}

TEST(ApiBatched, W4A4Nvfp4HiddenIsAccepted) {
  testing::MoECase c = small_case();
  c.aq = ActQuant::nvfp4;
  Batched b(c, 4);
  // NVFP4 activations: data (EL, M, H/2), scales (EL, M, H/16), quantized from x
  const int64_t EL = 4, M = 4, H = 64;
  std::vector<float> xf(size_t(EL * M * H));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_f32(b.x[i]);
  std::vector<uint8_t> data(size_t(EL * M * H / 2)), scale(size_t(EL * M * H / 16));
  detail::nvfp4_quantize_rows(xf.data(), EL * M, H, 1.0f / b.p.host->a13_dq, data.data(), scale.data());
  BatchedArgs a = b.args();
  a.hidden_states = TensorView::of(data.data(), DType::u8, {EL, M, H / 2});
  a.hidden_scale = TensorView::of(scale.data(), DType::e4m3, {EL, M, H / 16});
  b.layer.forward_batched(a);
  std::vector<uint16_t> want(b.out.size(), kPoison);
  a.out = TensorView::of(want.data(), DType::bf16, {EL, M, H});
  std::vector<float> scratch(detail::reference_scratch_floats(*b.p.host));
  detail::reference_forward_batched(*b.p.host, a, scratch.data());
  EXPECT_EQ(b.out, want);
}

// ---------------------------------------------------------------------------
// route()
// ---------------------------------------------------------------------------
struct Route {
  int64_t T = 3, E = 8, k = 2;
  std::vector<float> logits, weights, bias;
  std::vector<int32_t> ids;
  Route() : logits(size_t(T * E)), weights(size_t(T * k), -7.0f), bias(size_t(E), 0.0f), ids(size_t(T * k), -7) {
    std::mt19937 rng{uint32_t(fresh_seed())};
    std::normal_distribution<float> n(0.f, 2.f);
    for (float& v : logits) v = n(rng);
  }
  RouteArgs args() {
    RouteArgs a;
    a.router_logits = TensorView::of(logits.data(), DType::f32, {T, E});
    a.topk_weights = TensorView::of(weights.data(), DType::f32, {T, k});
    a.topk_ids = TensorView::of(ids.data(), DType::i32, {T, k});
    a.top_k = k;
    return a;
  }
  bool untouched() const {
    for (float w : weights)
      if (w != -7.0f) return false;
    for (int32_t i : ids)
      if (i != -7) return false;
    return true;
  }
  void expect_rejected(const RouteArgs& a, std::initializer_list<const char*> needles,
                       ErrorKind kind = ErrorKind::invalid_argument) {
    expect_error([&] { route(a); }, kind, needles);
    EXPECT_TRUE(untouched());
  }
};

TEST(ApiRoute, SoftmaxRenormalizedTopKOnAKnownExample) {
  Route r;
  r.logits = {0.f, 1.f, 3.f, 2.f, -1.f, 0.5f, 2.f, -3.f,   // top-2: 2, then the tie 3|6 -> 3
              5.f, 5.f, 5.f, 5.f, 5.f, 5.f, 5.f, 5.f,      // all tied: 0, 1
              -9.f, -8.f, -7.f, -6.f, -5.f, -4.f, 7.f, -2.f};
  route(r.args());
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3, 0, 1, 6, 7}));
  const float w0 = 1.0f / (1.0f + std::exp(-1.0f));  // e^3 / (e^3 + e^2)
  EXPECT_NEAR(r.weights[0], w0, 1e-6f);
  EXPECT_NEAR(r.weights[1], 1.0f - w0, 1e-6f);
  EXPECT_NEAR(r.weights[2], 0.5f, 1e-6f);
  EXPECT_NEAR(r.weights[3], 0.5f, 1e-6f);
  EXPECT_NEAR(r.weights[4], 1.0f / (1.0f + std::exp(-9.0f)), 1e-6f);
}

TEST(ApiRoute, ZeroTokensIsANoOp) {
  Route r;
  RouteArgs a = r.args();
  a.router_logits.shape[0] = a.topk_weights.shape[0] = a.topk_ids.shape[0] = 0;
  EXPECT_NO_THROW(route(a));
  EXPECT_TRUE(r.untouched());
}

TEST(ApiRouteBad, LogitsWrongDtype) {
  Route r;
  RouteArgs a = r.args();
  a.router_logits.dtype = DType::bf16;
  r.expect_rejected(a, {"router_logits", "got bf16[3, 8]", "need f32[*, *]"});
}
TEST(ApiRouteBad, LogitsMissing) {
  Route r;
  RouteArgs a = r.args();
  a.router_logits = TensorView{};
  r.expect_rejected(a, {"router_logits", "got nothing"});
}
TEST(ApiRouteBad, LogitsNonContiguous) {
  Route r;
  RouteArgs a = r.args();
  a.router_logits.stride[0] = 1;
  a.router_logits.stride[1] = 3;
  r.expect_rejected(a, {"router_logits", "contiguous"});
}
TEST(ApiRouteBad, TopKZeroOrAboveExperts) {
  Route r;
  RouteArgs a = r.args();
  a.top_k = 0;
  r.expect_rejected(a, {"top_k", "got 0", "[1, E = 8]"});
  a.top_k = 9;
  r.expect_rejected(a, {"top_k", "got 9"});
}
TEST(ApiRouteBad, WeightsWrongShape) {
  Route r;
  RouteArgs a = r.args();
  a.topk_weights = TensorView::of(r.weights.data(), DType::f32, {3, 1});
  r.expect_rejected(a, {"topk_weights", "got f32[3, 1]", "need f32[3, 2]"});
}
TEST(ApiRouteBad, IdsWrongDtype) {
  Route r;
  RouteArgs a = r.args();
  a.topk_ids.dtype = DType::f32;
  r.expect_rejected(a, {"topk_ids", "got f32[3, 2]", "need i32[3, 2]"});
}
TEST(ApiRouteBad, IdsOnAnotherDevice) {
  Route r;
  RouteArgs a = r.args();
  a.topk_ids.device = DeviceType::cuda;
  r.expect_rejected(a, {"topk_ids", "on cuda:0", "on cpu"});
}
TEST(ApiRouteBad, CorrectionBiasWrongShape) {
  Route r;
  RouteArgs a = r.args();
  a.correction_bias = TensorView::of(r.bias.data(), DType::f32, {7});
  r.expect_rejected(a, {"correction_bias", "got f32[7]", "need f32[8]"});
}
TEST(ApiRouteBad, GroupsNotDividingExperts) {
  Route r;
  RouteArgs a = r.args();
  a.routing.method = RoutingMethod::sigmoid_grouped;
  a.routing.n_group = 3;
  r.expect_rejected(a, {"routing.n_group", "got 3"});
}
TEST(ApiRouteBad, TopkGroupAboveGroups) {
  Route r;
  RouteArgs a = r.args();
  a.routing.method = RoutingMethod::sigmoid_grouped;
  a.routing.n_group = 4;
  a.routing.topk_group = 5;
  r.expect_rejected(a, {"routing.topk_group", "got 5"});
}
TEST(ApiRouteBad, TopKAboveKeptGroups) {
  Route r;
  RouteArgs a = r.args();
  a.routing.method = RoutingMethod::sigmoid_grouped;
  a.routing.n_group = 8;  // groups of 1 expert, 1 kept: at most 1 expert reachable
  a.routing.topk_group = 1;
  r.expect_rejected(a, {"top_k", "got 2", "= 1"});
}
TEST(ApiRouteBad, OutputsOverlappingLogits) {
  Route r;
  RouteArgs a = r.args();
  a.topk_weights = TensorView::of(r.logits.data() + 1, DType::f32, {3, 2});
  const std::vector<float> before = r.logits;
  expect_error([&] { route(a); }, ErrorKind::invalid_argument, {"topk_weights", "overlapping router_logits"});
  EXPECT_EQ(r.logits, before);
}
TEST(ApiRouteBad, MisalignedCudaLogitsFailBeforeAnyCudaCall) {
  // Fake device pointers: validation must reject them without dereferencing.
  RouteArgs a;
  a.router_logits = TensorView::of(reinterpret_cast<void*>(0x100004), DType::f32, {3, 8}, DeviceType::cuda, 0);
  a.topk_weights = TensorView::of(reinterpret_cast<void*>(0x200000), DType::f32, {3, 2}, DeviceType::cuda, 0);
  a.topk_ids = TensorView::of(reinterpret_cast<void*>(0x300000), DType::i32, {3, 2}, DeviceType::cuda, 0);
  a.top_k = 2;
  expect_error([&] { route(a); }, ErrorKind::invalid_argument, {"router_logits", "aligned to 16 bytes"});
}
TEST(ApiRouteBad, CudaLogitsWithoutCudaBuildAreUnsupported) {
#if defined(FP4MOE_WITH_CUDA)
  GTEST_SKIP() << "this build routes on CUDA";
#else
  RouteArgs a;
  a.router_logits = TensorView::of(reinterpret_cast<void*>(0x100000), DType::f32, {3, 8}, DeviceType::cuda, 0);
  a.topk_weights = TensorView::of(reinterpret_cast<void*>(0x200000), DType::f32, {3, 2}, DeviceType::cuda, 0);
  a.topk_ids = TensorView::of(reinterpret_cast<void*>(0x300000), DType::i32, {3, 2}, DeviceType::cuda, 0);
  a.top_k = 2;
  expect_error([&] { route(a); }, ErrorKind::unsupported, {"router_logits", "no CUDA"});
#endif
}

}  // namespace
}  // namespace fp4moe
