// The public entries under random bad arguments (SPEC §6), on the host backends: Layer::forward,
// forward_batched, route and Layer::prepare. Each trial takes a valid call, breaks one or two
// things at random (an extent, the rank, a stride, the dtype, the device, the pointer, an expert
// id or count, a flag, two buffers overlapping, a field of the layer's description), makes the
// call, and checks what any call must do: either it succeeds, or it throws fp4moe::Error
// (invalid_argument or unsupported) whose message names an argument, and in both cases no byte
// outside what the call may write changes (every buffer sits in an allocation 16x its size, the
// rest poisoned). A failure prints the trial's seed and mutations. The single-mutation cases of
// test_api.cpp check the exact messages; this looks for the combinations nobody wrote down, and
// runs under ASan and UBSan in scripts/test_sanitize.sh (found in v65: an extent product
// overflowing int64 in TensorView, a misaligned host f32 read as such).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "moe_fixtures.hpp"

namespace fp4moe {
namespace {

constexpr uint8_t kPoison = 0xA5;
constexpr size_t kSlack = 16;  // each allocation holds 16x what the valid call reads or writes

// One allocation of kSlack x `bytes`, filled with kPoison, the valid data at its start.
struct Arena {
  std::vector<uint8_t> mem;
  explicit Arena(size_t bytes, const void* data = nullptr) : mem(kSlack * bytes + 64, kPoison) {
    if (data) std::memcpy(mem.data(), data, bytes);
  }
};

struct Trial {
  std::string what;  // the mutations, for the failure message
};

// A random extent that breaks or stretches `s` (arithmetic on s only while it is small: a
// mutation before may have left it at an extreme, and the test must not overflow itself).
int64_t odd_extent(std::mt19937_64& rng, int64_t s) {
  const bool small = s > -(int64_t(1) << 40) && s < (int64_t(1) << 40);
  const int64_t choices[] = {0, 1, small ? s - 1 : 2, small ? s + 1 : 3, small ? 2 * s : 4, -1, small ? -s : -5,
                             int64_t(1) << 31, int64_t(1) << 40, int64_t(1) << 62,
                             std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  return choices[rng() % std::size(choices)];
}

// Breaks one thing of view `v` (cases 0-5: an extent, the rank, a stride, the dtype, the device,
// the pointer); false when the case drawn does not apply to it (the caller draws again or moves on).
bool mutate_view(std::mt19937_64& rng, TensorView& v, const std::string& n, Trial& t) {
  switch (rng() % 6) {
    case 0: {
      if (v.ndim <= 0 || v.ndim > TensorView::kMaxDims) return false;  // (a rank mutated before)
      const int d = int(rng() % uint64_t(v.ndim));
      v.shape[d] = odd_extent(rng, v.shape[d]);
      t.what += n + ".shape[" + std::to_string(d) + "]=" + std::to_string(v.shape[d]) + " ";
      return true;
    }
    case 1: {
      const int nd[] = {-1, 0, 1, 2, 3, 4, 5, -2, 100, std::numeric_limits<int>::min()};
      v.ndim = nd[rng() % std::size(nd)];
      t.what += n + ".ndim=" + std::to_string(v.ndim) + " ";
      return true;
    }
    case 2: {
      if (v.ndim <= 0 || v.ndim > TensorView::kMaxDims) return false;
      const int d = int(rng() % uint64_t(v.ndim));
      const int64_t sd = v.stride[d] > -(int64_t(1) << 40) && v.stride[d] < (int64_t(1) << 40) ? v.stride[d] : 1;
      const int64_t st[] = {0, -1, 2, sd + 1, 2 * sd, int64_t(1) << 62};
      v.stride[d] = st[rng() % std::size(st)];
      t.what += n + ".stride[" + std::to_string(d) + "]=" + std::to_string(v.stride[d]) + " ";
      return true;
    }
    case 3: {
      const uint8_t dt = uint8_t(rng() % 8 == 0 ? 200 : rng() % 7);
      v.dtype = DType(dt);
      t.what += n + ".dtype=" + std::to_string(dt) + " ";
      return true;
    }
    case 4: {
      const uint8_t dev = uint8_t(rng() % 3 == 0 ? 7 : 1);
      v.device = DeviceType(dev);
      v.device_id = int(rng() % 3) - 1;
      t.what += n + ".device=" + std::to_string(dev) + ":" + std::to_string(v.device_id) + " ";
      return true;
    }
    default: {
      // (Not past a null pointer: a small non-null address is a wild pointer, which no check can tell.)
      const bool null = rng() % 2 || v.data == nullptr;
      v.data = null ? nullptr : static_cast<uint8_t*>(v.data) + 1 + rng() % 3;
      t.what += n + (null ? ".data=null " : ".data misaligned ");
      return true;
    }
  }
}

// One of `values` into a random slot of `slots` (an expert id, a count).
void mutate_value(std::mt19937_64& rng, const std::vector<int32_t*>& slots, std::initializer_list<int32_t> values,
                  const char* what, Trial& t) {
  if (slots.empty()) return;
  int32_t* slot = slots[rng() % slots.size()];
  *slot = *(values.begin() + rng() % values.size());
  t.what += std::string(what) + "=" + std::to_string(*slot) + " ";
}

// Breaks one thing the forward calls share: one of the first `count` views (half the draws), or
// one of `slots` to one of `values` (a quarter); false for the last quarter, where the caller
// breaks something of its own.
template <size_t N>
bool mutate_common(std::mt19937_64& rng, TensorView* const (&views)[N], const char* const (&names)[N], size_t count,
                   const std::vector<int32_t*>& slots, std::initializer_list<int32_t> values, const char* what,
                   Trial& t) {
  switch (rng() % 4) {
    case 0:
    case 1: {
      const size_t which = rng() % count;
      if (views[which]->present()) mutate_view(rng, *views[which], names[which], t);
      return true;
    }
    case 2:
      mutate_value(rng, slots, values, what, t);
      return true;
    default:
      return false;
  }
}

// Breaks one thing of a forward call: one of its views, an expert id, a flag, out or the workspace
// over another argument.
void mutate(std::mt19937_64& rng, ForwardArgs& a, std::vector<int32_t*>& id_slots, int64_t E, Trial& t,
            uint8_t* out_base, uint8_t* ws_base, uint8_t* x_base) {
  TensorView* const views[] = {&a.hidden_states, &a.topk_weights, &a.topk_ids, &a.out, &a.workspace};
  const char* const names[] = {"hidden_states", "topk_weights", "topk_ids", "out", "workspace"};
  if (mutate_common(rng, views, names, std::size(views), id_slots,
                    {int32_t(E), -2, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1,
                     int32_t(E) - 1},
                    "an expert id", t))
    return;
  switch (rng() % 3) {
    case 0:
      a.apply_router_weight_on_input = !a.apply_router_weight_on_input;
      a.accumulate = rng() % 2;
      t.what += "flags ";
      break;
    default:
      if (rng() % 2) {  // out over another argument's bytes
        const int o = int(rng() % 3);
        a.out.data = o == 0 ? x_base + 2 * (rng() % 8) : o == 1 ? ws_base + 2 * (rng() % 8) : out_base + 2;
        t.what += std::string("out over ") + (o == 0 ? "hidden_states " : o == 1 ? "workspace " : "itself+2 ");
      } else {
        a.workspace.data = rng() % 2 ? x_base : static_cast<void*>(const_cast<void*>(a.topk_ids.data));
        t.what += "workspace over an input ";
      }
      break;
  }
}

// (Addresses as integers: a claim may reach past the allocation, and pointer arithmetic there
// would be the test's own undefined behaviour.)
bool inside(const uint8_t* q, const void* base, size_t claim) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(base), at = reinterpret_cast<uintptr_t>(q);
  return at >= b && at - b < claim;
}

// After a call on `arenas` that threw (`err` non-empty) or not: a rejected call wrote nothing, an
// accepted one nothing outside `writable` (each an arena and the view it may write). Inputs never.
struct Written {
  Arena* arena;
  const TensorView* view;
};
void expect_nothing_outside(const std::string& ctx, bool threw, const std::string& err,
                            const std::vector<std::pair<Arena*, std::vector<uint8_t>>>& before,
                            const std::vector<Written>& writable) {
  for (const auto& [arena, old] : before) {
    const Written* w = nullptr;
    for (const Written& x : writable)
      if (x.arena == arena) w = &x;
    if (threw || !w) {
      EXPECT_TRUE(arena->mem == old) << ctx << ": " << (threw ? "a rejected call wrote: " + err : "an input changed");
      continue;
    }
    const size_t claim = w->view->nbytes();
    for (size_t i = 0; i < arena->mem.size(); ++i)
      if (!inside(arena->mem.data() + i, w->view->data, claim))
        ASSERT_EQ(arena->mem[i], old[i]) << ctx << ": byte " << i << " outside the claimed output";
  }
}

// One trial's call and what every call must do: return, or throw fp4moe::Error of kind
// invalid_argument or unsupported whose message holds one of `names` (anything else fails the
// test); an unmutated (`valid`) call must return; nothing written outside `writable`. Counts
// the outcome.
template <class F>
void run_trial(const std::string& ctx, F&& call, const std::vector<const char*>& names, bool valid,
               const std::vector<std::pair<Arena*, std::vector<uint8_t>>>& before,
               const std::vector<Written>& writable, int& rejected, int& accepted) {
  bool threw = false;
  std::string err;
  try {
    call();
  } catch (const Error& e) {
    threw = true;
    err = e.what();
    EXPECT_TRUE(e.kind() == ErrorKind::invalid_argument || e.kind() == ErrorKind::unsupported)
        << ctx << ": kind " << int(e.kind()) << ": " << err;
    bool named = false;
    for (const char* n : names) named |= err.find(n) != std::string::npos;
    EXPECT_TRUE(named) << ctx << ": the message names no argument: " << err;
  } catch (const std::exception& e) {
    ADD_FAILURE() << ctx << ": not an fp4moe::Error: " << e.what();
    return;
  }
  EXPECT_FALSE(valid && threw) << ctx << ": the valid call failed: " << err;
  ++(threw ? rejected : accepted);
  expect_nothing_outside(ctx, threw, err, before, writable);
}

class ApiMutations : public ::testing::TestWithParam<const char*> {
 protected:
  testing::MoECase small() const { return testing::small_api_case("mutations", 5, std::random_device{}()); }
  Layer prepare(const testing::MoEProblem& p) const {
    PrepareOptions po;
    po.backend = GetParam();
    return Layer::prepare(p.desc, p.weights, po);
  }
  std::string context(uint64_t seed, int trial, const Trial& t) const {
    return "seed " + std::to_string(seed) + " trial " + std::to_string(trial) + " [" + t.what + "]";
  }
};

TEST_P(ApiMutations, ForwardBadArgumentsAreNamedErrorsAndWriteNothingOutsideTheCall) {
  const testing::MoECase c = small();
  const testing::MoEProblem p = testing::make_problem(c);
  const Layer layer = prepare(p);
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const size_t x_bytes = p.x.size() * 2, w_bytes = p.topk_weights.size() * 4, id_bytes = p.topk_ids.size() * 4;
  const size_t out_bytes = size_t(c.T * c.H) * 2, ws_bytes = layer.workspace_size(c.T);
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Arena x(x_bytes, p.x.data()), w(w_bytes, p.topk_weights.data()), ids(id_bytes, p.topk_ids.data());
    Arena out(out_bytes), ws(ws_bytes);
    ForwardArgs a;
    a.hidden_states = TensorView::of(x.mem.data(), DType::bf16, {c.T, c.H});
    a.topk_weights = TensorView::of(w.mem.data(), DType::f32, {c.T, c.k});
    a.topk_ids = TensorView::of(ids.mem.data(), DType::i32, {c.T, c.k});
    a.out = TensorView::of(out.mem.data(), DType::bf16, {c.T, c.H});
    a.workspace = TensorView::of(ws.mem.data(), DType::u8, {int64_t(ws_bytes)});
    std::vector<int32_t*> id_slots;
    for (size_t i = 0; i < p.topk_ids.size(); ++i) id_slots.push_back(reinterpret_cast<int32_t*>(ids.mem.data()) + i);
    Trial t;
    const int mutations = trial == 0 ? 0 : 1 + int(rng() % 2);  // trial 0: the valid call
    for (int m = 0; m < mutations; ++m) mutate(rng, a, id_slots, c.E, t, out.mem.data(), ws.mem.data(), x.mem.data());
    // What every arena holds before the call (the expert-id mutation writes them on purpose).
    const std::vector<std::pair<Arena*, std::vector<uint8_t>>> before = {
        {&x, x.mem}, {&w, w.mem}, {&ids, ids.mem}, {&out, out.mem}, {&ws, ws.mem}};
    run_trial(context(seed, trial, t), [&] { layer.forward(a); },
              {"hidden_states", "topk_weights", "topk_ids", "out", "workspace", "apply_router_weight_on_input",
               "accumulate"},
              trial == 0, before, {{&out, &a.out}, {&ws, &a.workspace}}, rejected, accepted);
  }
  // The mutations reach both outcomes (many break nothing that matters: a stride of a unit dim,
  // -1 for an expert id, a larger workspace).
  EXPECT_GT(rejected, 100);
  EXPECT_GT(accepted, 1);
}

TEST_P(ApiMutations, BatchedBadArgumentsAreNamedErrorsAndWriteNothingOutsideTheCall) {
  const testing::MoECase c = small();
  const testing::MoEProblem p = testing::make_problem(c);
  const Layer layer = prepare(p);
  const int64_t EL = layer.num_local_experts(), M = 6, H = c.H;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> x(size_t(EL * M * H));
  for (uint16_t& v : x) v = uint16_t(0x3C00 + rng() % 0x800);  // bf16 in [2^-7, 2^-3)
  std::vector<int32_t> counts(static_cast<size_t>(EL));
  for (int32_t& v : counts) v = int32_t(rng() % uint64_t(M + 1));
  const size_t x_bytes = x.size() * 2, n_bytes = counts.size() * 4, ws_bytes = layer.batched_workspace_size(M);
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Arena ax(x_bytes, x.data()), an(n_bytes, counts.data()), out(x_bytes), ws(ws_bytes);
    BatchedArgs a;
    a.hidden_states = TensorView::of(ax.mem.data(), DType::bf16, {EL, M, H});
    a.expert_num_tokens = TensorView::of(an.mem.data(), DType::i32, {EL});
    a.out = TensorView::of(out.mem.data(), DType::bf16, {EL, M, H});
    a.workspace = TensorView::of(ws.mem.data(), DType::u8, {int64_t(ws_bytes)});
    std::vector<int32_t*> count_slots;
    for (int64_t e = 0; e < EL; ++e) count_slots.push_back(reinterpret_cast<int32_t*>(an.mem.data()) + e);
    TensorView* const views[] = {&a.hidden_states, &a.expert_num_tokens, &a.out, &a.workspace, &a.hidden_scale};
    const char* const names[] = {"hidden_states", "expert_num_tokens", "out", "workspace", "hidden_scale"};
    Trial t;
    const int mutations = trial == 0 ? 0 : 1 + int(rng() % 2);
    for (int m = 0; m < mutations; ++m) {
      if (mutate_common(rng, views, names, 4, count_slots,
                        {int32_t(M) + 1, -1, std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max(), 0, int32_t(M)},
                        "a count", t))
        continue;
      if (rng() % 2) {  // an NVFP4 scale given with bf16 activations, or out over the input
        a.hidden_scale = TensorView::of(ws.mem.data(), DType::e4m3, {EL, M, H / 16});
        t.what += "hidden_scale given ";
      } else {
        a.out.data = ax.mem.data() + 2 * (rng() % 8);
        t.what += "out over hidden_states ";
      }
    }
    const std::vector<std::pair<Arena*, std::vector<uint8_t>>> before = {
        {&ax, ax.mem}, {&an, an.mem}, {&out, out.mem}, {&ws, ws.mem}};
    run_trial(context(seed, trial, t), [&] { layer.forward_batched(a); },
              std::vector<const char*>(std::begin(names), std::end(names)), trial == 0, before,
              {{&out, &a.out}, {&ws, &a.workspace}}, rejected, accepted);
  }
  EXPECT_GT(rejected, 50);
  EXPECT_GT(accepted, 1);
}

TEST_P(ApiMutations, RouteBadArgumentsAreNamedErrorsAndWriteNothingOutsideTheCall) {
  // route() has no layer: the parameter only repeats it (a second seed).
  const int64_t T = 5, E = 8, k = 2;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::vector<float> logits(static_cast<size_t>(T * E)), bias(static_cast<size_t>(E));
  std::normal_distribution<float> nd(0.f, 2.f);
  for (float& v : logits) v = nd(rng);
  for (float& v : bias) v = nd(rng) * 0.1f;
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Arena al(logits.size() * 4, logits.data()), ab(bias.size() * 4, bias.data());
    Arena aw(size_t(T * k) * 4), ai(size_t(T * k) * 4);
    RouteArgs a;
    a.router_logits = TensorView::of(al.mem.data(), DType::f32, {T, E});
    a.topk_weights = TensorView::of(aw.mem.data(), DType::f32, {T, k});
    a.topk_ids = TensorView::of(ai.mem.data(), DType::i32, {T, k});
    a.top_k = k;
    const bool grouped = trial % 2;
    if (grouped) {
      a.routing.method = RoutingMethod::sigmoid_grouped;
      a.routing.n_group = 4;
      a.routing.topk_group = 2;
      a.correction_bias = TensorView::of(ab.mem.data(), DType::f32, {E});
    }
    TensorView* const views[] = {&a.router_logits, &a.correction_bias, &a.topk_weights, &a.topk_ids};
    const char* const view_names[] = {"router_logits", "correction_bias", "topk_weights", "topk_ids"};
    const char* const names[] = {"router_logits", "correction_bias", "topk_weights", "topk_ids", "top_k", "n_group",
                                 "topk_group", "routing", "method"};
    Trial t;
    const int mutations = trial < 2 ? 0 : 1 + int(rng() % 2);  // trials 0, 1: the valid calls
    for (int m = 0; m < mutations; ++m) {
      if (mutate_common(rng, views, view_names, std::size(views), {}, {0}, "", t)) continue;
      if (rng() % 2) {
        const int64_t ks[] = {0, -1, E, E + 1, std::numeric_limits<int64_t>::max(), 1};
        a.top_k = ks[rng() % std::size(ks)];
        t.what += "top_k=" + std::to_string(a.top_k) + " ";
      } else {
        const int g[] = {0, -1, 3, 8, 16, std::numeric_limits<int>::min()};
        (rng() % 2 ? a.routing.n_group : a.routing.topk_group) = g[rng() % std::size(g)];
        if (rng() % 4 == 0) a.routing.method = RoutingMethod(uint8_t(9));
        t.what += "groups " + std::to_string(a.routing.n_group) + "/" + std::to_string(a.routing.topk_group) + " ";
      }
    }
    const std::vector<std::pair<Arena*, std::vector<uint8_t>>> before = {
        {&al, al.mem}, {&ab, ab.mem}, {&aw, aw.mem}, {&ai, ai.mem}};
    run_trial(context(seed, trial, t), [&] { route(a); },
              std::vector<const char*>(std::begin(names), std::end(names)), trial < 2, before,
              {{&aw, &a.topk_weights}, {&ai, &a.topk_ids}}, rejected, accepted);
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(accepted, 1);
}

TEST_P(ApiMutations, PrepareBadArgumentsAreNamedErrorsAndChangeNoWeight) {
  // NVFP4 W4A4 with an expert map and MXFP4 with biases take turns: every checkpoint tensor is
  // present in one of them. The weights are copied into arenas; the description is mutated too.
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  testing::MoECase nv = small(), mx = small();
  nv.aq = ActQuant::nvfp4;
  nv.E_local = 3;
  mx.wf = WeightFormat::mxfp4;
  mx.act = Activation::swiglu_oai;
  mx.gate_up = GateUpLayout::interleaved;
  mx.bias = true;
  const testing::MoEProblem problems[2] = {testing::make_problem(nv), testing::make_problem(mx)};
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const testing::MoEProblem& p = problems[trial % 2];
    LayerDesc desc = p.desc;
    CheckpointWeights w = p.weights;
    TensorView* const views[] = {&w.w13, &w.w13_scale, &w.w13_scale_2, &w.w2, &w.w2_scale, &w.w2_scale_2,
                                 &w.w13_input_scale, &w.w2_input_scale, &w.w13_bias, &w.w2_bias, &w.expert_map};
    const char* const view_names[] = {"w13", "w13_scale", "w13_scale_2", "w2", "w2_scale", "w2_scale_2",
                                      "w13_input_scale", "w2_input_scale", "w13_bias", "w2_bias", "expert_map"};
    std::vector<const char*> names(std::begin(view_names), std::end(view_names));
    names.push_back("desc.");
    std::vector<Arena> arenas;
    arenas.reserve(std::size(views));
    for (TensorView* v : views)
      if (v->present()) {
        arenas.emplace_back(v->nbytes(), v->data);
        v->data = arenas.back().mem.data();
      }
    // The expert map's entries, in its arena (whatever a mutation does to its view).
    std::vector<int32_t*> map_slots;
    if (w.expert_map.present())
      for (int64_t e = 0; e < p.desc.num_experts; ++e) map_slots.push_back(static_cast<int32_t*>(w.expert_map.data) + e);
    Trial t;
    const int mutations = trial < 2 ? 0 : 1 + int(rng() % 2);  // trials 0, 1: the valid calls
    for (int m = 0; m < mutations; ++m) {
      // A view, or an expert map entry out of range or repeated; else a tensor the format does not
      // take, given anyway, or a field of the description.
      if (mutate_common(rng, views, view_names, std::size(views), map_slots,
                        {-2, 3, 0, 1, std::numeric_limits<int32_t>::max(), -1}, "an expert_map entry", t))
        continue;
      const int which = int(rng() % std::size(views));
      if (rng() % 3 == 0 && !views[which]->present() && !arenas.empty()) {
        *views[which] = TensorView::of(arenas[0].mem.data(), DType::f32, {p.desc.num_experts});
        t.what += std::string(view_names[which]) + " given ";
        continue;
      }
      const int64_t big[] = {0, -1, 16, 48, 96, int64_t(1) << 20, (int64_t(1) << 20) + 16, int64_t(1) << 40,
                             std::numeric_limits<int64_t>::max()};
      switch (rng() % 8) {
        case 0: desc.hidden = big[rng() % std::size(big)]; break;
        case 1: desc.intermediate = big[rng() % std::size(big)]; break;
        case 2: desc.num_experts = big[rng() % std::size(big)]; break;
        case 3: desc.top_k = big[rng() % std::size(big)]; break;
        case 4: desc.weight_format = WeightFormat(uint8_t(rng() % 3)); break;
        case 5: desc.act_quant = ActQuant(uint8_t(rng() % 3)); break;
        case 6: desc.swiglu_limit = rng() % 2 ? -1.0f : std::numeric_limits<float>::quiet_NaN(); break;
        default: desc.gate_up = GateUpLayout(uint8_t(rng() % 3)); break;
      }
      t.what += "desc H " + std::to_string(desc.hidden) + " I " + std::to_string(desc.intermediate) + " E " +
                std::to_string(desc.num_experts) + " k " + std::to_string(desc.top_k) + " ";
    }
    std::vector<std::pair<Arena*, std::vector<uint8_t>>> before;
    for (Arena& a : arenas) before.emplace_back(&a, a.mem);
    PrepareOptions po;
    po.backend = GetParam();
    run_trial(context(seed, trial, t),
              [&] {
                const Layer layer = Layer::prepare(desc, w, po);
                (void)layer.workspace_size(1);
                (void)layer.workspace_size(int64_t(1) << 20);
              },
              names, trial < 2, before, {}, rejected, accepted);
  }
  EXPECT_GT(rejected, 60);
  EXPECT_GT(accepted, 1);
}

INSTANTIATE_TEST_SUITE_P(HostBackends, ApiMutations, ::testing::Values("reference", "cpu"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace fp4moe
