// The "cpu" backend (src/cpu) against the scalar reference: the conformance table, the
// batched format, thread-count independence, every output element written and nothing
// outside out.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "cpu/cpu_amx.hpp"
#include "cpu/cpu_codes.hpp"
#include "cpu/worker_pool.hpp"
#include "env_test_util.hpp"
#include "format/quant.hpp"
#include "moe_fixtures.hpp"
#include "reference/reference.hpp"

namespace fp4moe {
namespace {

using testing::MoECase;
using testing::MoEProblem;

constexpr int64_t kGuard = 64;  // poisoned floats before and after out

using testing::EnvVar;

// The cpu backend on the problem's own canonical weights (no copy), with `threads` threads and
// FP4MOE_CPU_SIMD = `simd` (nullptr: unset, the default).
std::unique_ptr<detail::Backend> cpu_on(const MoEProblem& p, const char* threads, const char* simd = nullptr) {
  EnvVar env_threads("FP4MOE_CPU_THREADS", threads), env_simd("FP4MOE_CPU_SIMD", simd);
  return detail::cpu_backend_entry().create(p.host, PrepareOptions{});
}

// One standard forward with f32 out inside NaN guards; returns out, checks the guards.
template <class Forward>
std::vector<float> run_f32(const MoEProblem& p, size_t workspace_bytes, const Forward& forward) {
  const int64_t T = p.c.T, H = p.c.H;
  std::vector<float> buf(size_t(T * H + 2 * kGuard), std::nanf(""));
  float* out = buf.data() + kGuard;
  if (p.c.accumulate)
    for (int64_t i = 0; i < T * H; ++i) out[i] = bf16_to_f32(p.out_init[i]);
  std::vector<uint8_t> ws(workspace_bytes + 3);
  ForwardArgs a;
  a.hidden_states = p.hidden_view();
  a.topk_weights = p.topk_weights_view();
  a.topk_ids = p.topk_ids_view();
  a.out = TensorView::of(out, DType::f32, {T, H});
  a.workspace = TensorView::of(ws.data() + 3, DType::u8, {int64_t(workspace_bytes)});  // odd start byte
  a.apply_router_weight_on_input = p.c.router_weight_on_input;
  a.accumulate = p.c.accumulate;
  forward(a);
  for (int64_t g = 0; g < kGuard; ++g) {
    EXPECT_TRUE(std::isnan(buf[g])) << "written before out at " << g;
    EXPECT_TRUE(std::isnan(buf[kGuard + T * H + g])) << "written after out at " << g;
  }
  return std::vector<float>(out, out + T * H);
}

// The FP4MOE_CPU_SIMD levels this CPU has besides the scalar loops, best last.
std::vector<const char*> simd_levels() {
  std::vector<const char*> v;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) v.push_back("avx2");
  if (avx2 && __builtin_cpu_supports("avx512f")) v.push_back("avx512");
  if (avx2 && __builtin_cpu_supports("avx512f") && detail::amx_usable()) v.push_back("amx");
#endif
  return v;
}
bool is_amx(const char* level) { return std::string(level) == "amx"; }

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CpuBackendCase : public ::testing::TestWithParam<MoECase> {};

// Through the public path (auto selection picks cpu without a GPU, or named), against the
// oracle; then the same problem on 1 and 3 threads must give the same bits.
TEST_P(CpuBackendCase, MatchesReferenceAndIgnoresThreadCount) {
  const MoEProblem p = testing::make_problem(GetParam());
  const std::vector<float> ref = testing::run_reference(p, DType::f32);

  PrepareOptions o;
  o.backend = "cpu";
  const Layer layer = Layer::prepare(p.desc, p.weights, o);
  ASSERT_EQ(layer.backend(), "cpu");
  ASSERT_EQ(layer.device(), DeviceType::cpu);
  const std::vector<float> got =
      run_f32(p, layer.workspace_size(p.c.T), [&](const ForwardArgs& a) { layer.forward(a); });
  const double err = testing::rel_l2(got, ref);
  EXPECT_LE(err, testing::tolerance(p.c)) << p.c.name;  // NaN (an unwritten element) never passes

  const auto one = cpu_on(p, "1"), three = cpu_on(p, "3");
  const std::vector<float> a = run_f32(p, one->workspace_size(p.c.T), [&](const ForwardArgs& x) { one->forward(x); });
  const std::vector<float> b =
      run_f32(p, three->workspace_size(p.c.T), [&](const ForwardArgs& x) { three->forward(x); });
  EXPECT_TRUE(bit_equal(a, b)) << "1 thread vs 3 threads differ";
  EXPECT_TRUE(bit_equal(a, got)) << "1 thread vs the default thread count differ";

  // the SIMD paths against the scalar loops: the default (the best level) and every vector level
  // this CPU has give the same bits; amx (its large experts on AMX tiles, summed in the tiles'
  // order) is held to the oracle, and to the same bits on 2 threads as on 1
  const auto scalar = cpu_on(p, "3", "0");
  const std::vector<float> c =
      run_f32(p, scalar->workspace_size(p.c.T), [&](const ForwardArgs& x) { scalar->forward(x); });
  const std::vector<const char*> levels = simd_levels();
  if (levels.empty() || !is_amx(levels.back())) EXPECT_TRUE(bit_equal(a, c)) << "FP4MOE_CPU_SIMD=0 differs from the default";
  for (const char* level : levels) {
    const auto simd = cpu_on(p, "2", level);
    const std::vector<float> v = run_f32(p, simd->workspace_size(p.c.T), [&](const ForwardArgs& x) { simd->forward(x); });
    if (!is_amx(level)) {
      EXPECT_TRUE(bit_equal(v, c)) << "FP4MOE_CPU_SIMD=" << level << " differs from FP4MOE_CPU_SIMD=0";
      continue;
    }
    EXPECT_LE(testing::rel_l2(v, ref), testing::tolerance(p.c)) << "amx";
    const auto one_amx = cpu_on(p, "1", level);
    const std::vector<float> v1 =
        run_f32(p, one_amx->workspace_size(p.c.T), [&](const ForwardArgs& x) { one_amx->forward(x); });
    EXPECT_TRUE(bit_equal(v, v1)) << "amx: 1 thread vs 2 threads differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Conformance, CpuBackendCase, ::testing::ValuesIn(testing::conformance_cases(false)),
                         [](const ::testing::TestParamInfo<MoECase>& i) { return i.param.name; });

// Batched format: random counts (0 and M included), rows past a count untouched, every
// other row the reference's; bf16 and NVFP4 (W4A4) inputs.
//
// Fresh inputs every run, so the comparison must hold for any of them. SPEC §4 allows the fp32
// sums in any order; where a GEMM 1 sum lands next to a bf16 rounding edge of h, the backend's h
// and the reference's differ by one bf16 ulp (under W4A4 that can move the NVFP4 code of h, or
// its block's scale). Such a flip moves one row: measured 2026-12-02 over 4,000 runs of each
// test, at most one row per run past tolerance(c) (in 1.7% of the runs of W4A16 NVFP4, 0.2% of
// W4A4), by at most 3.4e-3 (W4A16) and 5.1e-2 (W4A4) of its norm, which carried the whole batch's
// rel_l2 past tolerance(c) (6.2e-4 against 5e-4, 6.7e-3 against 2e-3). So, row by row: the
// median row within tolerance(c) (an error that touches every row: a lost rounding, a wrong
// scale), at most two rows past it, and none past 0.25 of its norm (a wrong, swapped or
// unwritten row is off by its norm or more).
void expect_rows_match(const std::vector<float>& got, const std::vector<float>& want, int64_t H, float tol,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  std::vector<double> rows;
  for (size_t r = 0; r < want.size() / size_t(H); ++r) {
    const std::vector<float> g(got.begin() + r * H, got.begin() + (r + 1) * H),
        x(want.begin() + r * H, want.begin() + (r + 1) * H);
    rows.push_back(testing::rel_l2(g, x));  // NaN or an unwritten row: infinite
    EXPECT_LE(rows.back(), 0.25) << what << ": row " << r << " of the written rows";
  }
  EXPECT_LE(std::count_if(rows.begin(), rows.end(), [&](double e) { return e > tol; }), 2)
      << what << ": rows past " << tol;
  std::nth_element(rows.begin(), rows.begin() + rows.size() / 2, rows.end());
  EXPECT_LE(rows[rows.size() / 2], tol) << what << ": the median row";
}

void check_batched(const MoECase& c, bool nvfp4_input, DType out_dtype) {
  const MoEProblem p = testing::make_problem(c);
  const detail::HostWeights& w = *p.host;
  const int64_t EL = w.num_local, M = 9, H = w.H();
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::vector<int32_t> counts(EL);
  for (int64_t e = 0; e < EL; ++e) counts[e] = int32_t(rng() % (M + 1));
  counts[0] = 0;
  if (EL > 1) counts[1] = int32_t(M);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> x(size_t(EL * M * H));
  for (uint16_t& v : x) v = bf16_from_f32(normal(rng));
  std::vector<uint8_t> xq, xs;
  BatchedArgs a;
  if (nvfp4_input) {
    std::vector<float> xf(x.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_f32(x[i]);
    xq.resize(x.size() / 2);
    xs.resize(x.size() / kNvfp4Block);
    detail::nvfp4_quantize_rows(xf.data(), EL * M, H, 1.0f / w.a13_dq, xq.data(), xs.data());
    a.hidden_states = TensorView::of(xq.data(), DType::u8, {EL, M, H / 2});
    a.hidden_scale = TensorView::of(xs.data(), DType::e4m3, {EL, M, H / kNvfp4Block});
  } else {
    a.hidden_states = TensorView::of(x.data(), DType::bf16, {EL, M, H});
  }
  a.expert_num_tokens = TensorView::of(counts.data(), DType::i32, {EL});

  // reference, f32 out
  std::vector<float> ref(size_t(EL * M * H), 0.0f);
  std::vector<float> scratch(detail::reference_scratch_floats(w));
  BatchedArgs r = a;
  r.out = TensorView::of(ref.data(), DType::f32, {EL, M, H});
  detail::reference_forward_batched(w, r, scratch.data());

  // cpu, poisoned out with guards
  const size_t es = dtype_size(out_dtype), n = size_t(EL * M * H);
  std::vector<uint8_t> buf((n + 2 * kGuard) * es, 0xA5);
  uint8_t* out = buf.data() + kGuard * es;
  PrepareOptions o;
  o.backend = "cpu";
  const Layer layer = Layer::prepare(p.desc, p.weights, o);
  std::vector<uint8_t> ws(layer.batched_workspace_size(M));
  a.out = TensorView::of(out, out_dtype, {EL, M, H});
  a.workspace = TensorView::of(ws.data(), DType::u8, {int64_t(ws.size())});
  layer.forward_batched(a);

  for (size_t i = 0; i < size_t(kGuard) * es; ++i) {
    ASSERT_EQ(buf[i], 0xA5) << "written before out";
    ASSERT_EQ(buf[(kGuard + n) * es + i], 0xA5) << "written after out";
  }
  std::vector<float> got, want;
  for (int64_t e = 0; e < EL; ++e)
    for (int64_t row = 0; row < M; ++row) {
      const uint8_t* at = out + ((e * M + row) * H) * es;
      if (row >= counts[e]) {
        for (size_t b = 0; b < size_t(H) * es; ++b) ASSERT_EQ(at[b], 0xA5) << "row " << row << " past count of " << e;
        continue;
      }
      for (int64_t i = 0; i < H; ++i) {
        got.push_back(detail::read_activation(out, out_dtype, (e * M + row) * H + i));
        // the reference rounded once to out's dtype, as the layer rounds its fp32 result
        uint8_t one[4];
        detail::write_activation(one, out_dtype, 0, ref[(e * M + row) * H + i]);
        want.push_back(detail::read_activation(one, out_dtype, 0));
      }
    }
  expect_rows_match(got, want, H, testing::tolerance(c),
                    c.name + " (problem seed " + std::to_string(c.seed) + ", counts and inputs seed " +
                        std::to_string(seed) + ")");
}

MoECase small(const char* name, WeightFormat wf, ActQuant aq, int64_t E_local = 0) {
  MoECase c{.name = name, .H = 256, .I = 128, .E = 8, .k = 2, .T = 1, .wf = wf, .aq = aq};
  c.E_local = E_local;
  c.seed = std::random_device{}();
  if (wf == WeightFormat::mxfp4) {
    c.act = Activation::swiglu_oai;
    c.bias = true;
  }
  return c;
}

TEST(CpuBackendBatched, Nvfp4Bf16InputMatchesReference) {
  check_batched(small("b_nvfp4", WeightFormat::nvfp4, ActQuant::none), false, DType::f32);
}
TEST(CpuBackendBatched, Mxfp4BiasBf16OutMatchesReference) {
  check_batched(small("b_mxfp4", WeightFormat::mxfp4, ActQuant::none, 5), false, DType::bf16);
}
TEST(CpuBackendBatched, W4a4Bf16InputMatchesReference) {
  check_batched(small("b_w4a4", WeightFormat::nvfp4, ActQuant::nvfp4), false, DType::f32);
}
TEST(CpuBackendBatched, W4a4Nvfp4InputMatchesReference) {
  check_batched(small("b_w4a4_u8", WeightFormat::nvfp4, ActQuant::nvfp4), true, DType::f16);
}

// The cpu codes layout (src/cpu/cpu_codes.hpp), against its written rule: after the conversion,
// weight k of a row (canonical: nibble k % 2 of byte k / 2) sits where cpu_code_at says; every k
// has its own nibble; and the conversion back restores every byte. K = 16..2048: no group, one,
// several, and a final canonical 16 (K % 32 == 16).
TEST(CpuCodes, EachWeightWhereTheIndexFunctionSaysAndBack) {
  std::mt19937 rng(std::random_device{}());
  for (int64_t K : {16, 32, 48, 64, 96, 336, 2048}) {
    const int64_t n = 3;
    std::vector<uint8_t> canon(size_t(n * K / 2));
    for (uint8_t& b : canon) b = uint8_t(rng());
    std::vector<uint8_t> cpu = canon;
    detail::cpu_codes_from_canonical(cpu.data(), n, K);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<bool> used(size_t(K), false);
      for (int64_t k = 0; k < K; ++k) {
        const detail::CpuCodeAt at = detail::cpu_code_at(k, K);
        ASSERT_GE(at.byte, 0);
        ASSERT_LT(at.byte, K / 2);
        ASSERT_TRUE(at.shift == 0 || at.shift == 4);
        const size_t nibble = size_t(at.byte * 2 + at.shift / 4);
        EXPECT_FALSE(used[nibble]) << "K " << K << ": two weights at byte " << at.byte << " shift " << at.shift;
        used[nibble] = true;
        const int want = unpack_e2m1(canon[size_t(r * K / 2 + k / 2)], int(k % 2));
        EXPECT_EQ((cpu[size_t(r * K / 2 + at.byte)] >> at.shift) & 15, want) << "K " << K << " row " << r << " k " << k;
      }
    }
    if (K >= 32) EXPECT_NE(cpu, canon) << "K " << K << ": the conversion moved nothing";
    detail::canonical_from_cpu_codes(cpu.data(), n, K);
    EXPECT_EQ(cpu, canon) << "K " << K << ": not the canonical bytes back";
  }
}

// Weights shared with another backend (the tests share the problem's canonical weights with the
// reference) stay canonical and unchanged: the cpu backend converts a copy. Weights it holds
// alone (Layer::prepare's) it converts in place (the entry's adopt), once.
TEST(CpuCodes, SharedWeightsCopiedOwnWeightsConverted) {
  const MoEProblem p = testing::make_problem(small("codes", WeightFormat::nvfp4, ActQuant::none));
  const detail::HostBytes w13 = p.host->w13, w2 = p.host->w2;
  const auto shared = cpu_on(p, "1");
  EXPECT_EQ(p.host->codes, detail::CodeLayout::canonical);
  EXPECT_TRUE(p.host->w13 == w13 && p.host->w2 == w2) << "the shared weights were rewritten";

  const detail::BackendEntry e = detail::cpu_backend_entry();
  ASSERT_NE(e.adopt, nullptr);
  detail::HostWeights own = *p.host;
  e.adopt(own);
  EXPECT_EQ(own.codes, detail::CodeLayout::cpu);
  detail::HostBytes back = own.w13;
  detail::canonical_from_cpu_codes(back.data(), own.num_local * 2 * own.I(), own.H());
  EXPECT_TRUE(back == w13);
  back = own.w2;
  detail::canonical_from_cpu_codes(back.data(), own.num_local * own.H(), own.I());
  EXPECT_TRUE(back == w2);
  const detail::HostBytes once = own.w13;
  e.adopt(own);  // already cpu codes: nothing
  EXPECT_TRUE(own.w13 == once);

  // and the other backends refuse weights in cpu codes rather than misread them
  try {
    detail::reference_backend_entry().create(std::make_shared<detail::HostWeights>(own), PrepareOptions{});
    ADD_FAILURE() << "the reference took cpu codes";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::unsupported);
  }
}

// The backend's worker pool (cpu/worker_pool.hpp): every index once, on a thread numbered below
// the count, over many calls of different sizes (the workers kept between them), and from two
// callers at once (the second starts threads of its own).
TEST(CpuWorkerPool, EveryIndexOnceOverManyCallsAndTwoCallers) {
  for (const int threads : {2, 3, 8}) {
    detail::WorkerPool pool(threads);
    auto check = [&](int64_t n, int round) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_tid{0};
      pool.run(n, [&](int64_t i, int tid) {
        hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
        if (tid < 0 || tid >= threads) bad_tid.fetch_add(1, std::memory_order_relaxed);
      });
      size_t wrong = 0;
      for (const auto& h : hits) wrong += h.load() != 1;
      EXPECT_EQ(wrong, 0u) << "n " << n << ", " << threads << " threads, round " << round;
      EXPECT_EQ(bad_tid.load(), 0) << "n " << n << ", " << threads << " threads, round " << round;
    };
    for (int round = 0; round < 300; ++round)
      for (const int64_t n : {int64_t(0), int64_t(1), int64_t(2), int64_t(7), int64_t(1000)}) check(n, round);
    EXPECT_EQ(pool.workers(), threads - 1);
    std::thread other([&] {
      for (int round = 0; round < 200; ++round) check(777, round);
    });
    for (int round = 0; round < 200; ++round) check(555, round);
    other.join();
  }
  detail::WorkerPool unused(4);  // destroyed without a call: no thread was started
  EXPECT_EQ(unused.workers(), 0);
}

// A fork's child inherits the pool without its threads: its calls still visit every index (on
// threads of their own) and its destructor returns (alarm: a hang ends the child by a signal).
TEST(CpuWorkerPool, ForkChildRunsWithoutTheWorkers) {
  auto pool = std::make_unique<detail::WorkerPool>(3);
  std::atomic<int64_t> sum{0};
  pool->run(100, [&](int64_t i, int) { sum += i; });
  ASSERT_EQ(sum.load(), 4950);
  ASSERT_EQ(pool->workers(), 2);
  const pid_t child = fork();
  ASSERT_GE(child, 0) << "fork failed";
  if (child == 0) {
    alarm(20);
    std::atomic<int64_t> s{0};
    for (int round = 0; round < 50; ++round) pool->run(1000, [&](int64_t i, int) { s += i; });
    pool.reset();
    _exit(s.load() == 50 * 499500 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "child killed by signal " + std::to_string(WTERMSIG(status)) : "child's sums wrong");
  sum = 0;
  pool->run(100, [&](int64_t i, int) { sum += i; });  // the parent's workers still serve
  EXPECT_EQ(sum.load(), 4950);
}

// One backend, its workers kept: forwards one after another and from two host threads at once
// (each with its own buffers) give the bits of a one-thread backend.
TEST(CpuBackendPool, RepeatedAndConcurrentForwardsSameBits) {
  const MoEProblem p = testing::make_problem(testing::small_api_case("pool", 24, std::random_device{}()));
  const int64_t T = p.c.T;
  const auto one = cpu_on(p, "1"), three = cpu_on(p, "3");
  const std::vector<float> want = run_f32(p, one->workspace_size(T), [&](const ForwardArgs& x) { one->forward(x); });
  auto run3 = [&] { return run_f32(p, three->workspace_size(T), [&](const ForwardArgs& x) { three->forward(x); }); };
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(bit_equal(run3(), want)) << "forward " << i;
  std::vector<float> theirs[10];
  std::thread other([&] {
    for (auto& t : theirs) t = run3();
  });
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(bit_equal(run3(), want)) << "concurrent forward " << i;
  other.join();
  for (const auto& t : theirs) EXPECT_TRUE(bit_equal(t, want)) << "the other thread's forward";
}

// The ladder: cpu serves every layer on every machine, and "auto" picks it without a GPU.
TEST(CpuBackendSelect, EntryIsAvailableOnTheCpu) {
  const detail::BackendEntry e = detail::cpu_backend_entry();
  EXPECT_STREQ(e.name, "cpu");
  EXPECT_EQ(e.device, DeviceType::cpu);
  EXPECT_EQ(e.why_not_here(), "");
}

// The backend's environment variables: a bad value fails creation with invalid_argument, naming
// the variable and the value.
void expect_bad_variable_named(const char* name, const char* value) {
  const MoEProblem p = testing::make_problem(small("bad_env", WeightFormat::nvfp4, ActQuant::none));
  EnvVar env(name, value);
  try {
    detail::cpu_backend_entry().create(p.host, PrepareOptions{});
    ADD_FAILURE() << name << "=" << value << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + std::string(value) + "'"), std::string::npos) << e.what();
  }
}

TEST(CpuBackendSelect, BadThreadVariableIsNamed) { expect_bad_variable_named("FP4MOE_CPU_THREADS", "zero"); }

// Named on every level, not only where the AMX path runs.
TEST(CpuBackendSelect, BadAmxRowsVariableIsNamed) {
  expect_bad_variable_named("FP4MOE_CPU_AMX_ROWS", "0");
  expect_bad_variable_named("FP4MOE_CPU_AMX_ROWS", "eight");
}

TEST(CpuBackendSelect, BadSimdVariableIsNamed) {
  expect_bad_variable_named("FP4MOE_CPU_SIMD", "yes");
  expect_bad_variable_named("FP4MOE_CPU_SIMD", "avx1024");
}

// build_info() names the level the backend runs: the best this CPU has by default, each level
// asked for, and why not for a bad value.
TEST(CpuBackendSelect, BuildInfoNamesTheSimdLevel) {
  const std::vector<const char*> have = simd_levels();  // best last
  {
    EnvVar env("FP4MOE_CPU_SIMD", nullptr);
    EXPECT_EQ(build_info().cpu_simd, have.empty() ? "scalar" : have.back());
  }
  {
    EnvVar env("FP4MOE_CPU_SIMD", "0");
    EXPECT_EQ(build_info().cpu_simd, "scalar");
  }
  for (const char* level : have) {
    EnvVar env("FP4MOE_CPU_SIMD", level);
    EXPECT_EQ(build_info().cpu_simd, level);
  }
  EnvVar env("FP4MOE_CPU_SIMD", "yes");
  const std::string s = build_info().cpu_simd;
  EXPECT_EQ(s.rfind("unusable: ", 0), 0u) << s;
  EXPECT_NE(s.find("FP4MOE_CPU_SIMD"), std::string::npos) << s;
}

// A level this CPU lacks is refused by name, not run. (On a CPU with AVX-512 there is none to ask
// for; the levels it has are run by the conformance cases.)
TEST(CpuBackendSelect, MissingSimdLevelIsNamed) {
  const std::vector<const char*> have = simd_levels();
  bool missing = false;
  for (const char* level : {"avx2", "avx512", "amx"}) {
    if (std::find_if(have.begin(), have.end(), [&](const char* h) { return std::string(h) == level; }) != have.end())
      continue;
    missing = true;
    expect_bad_variable_named("FP4MOE_CPU_SIMD", level);
  }
  if (!missing) GTEST_SKIP() << "this CPU has every SIMD level";
}

// The AMX tiles' dots (cpu_amx.hpp) against integer sums: weights and activations small
// integers (exact in bf16, every partial sum exact in fp32), so the tiles must give the exact
// sums, whatever their order. 1 and 2 row blocks, 1-5 token blocks (the tiles take 3 at a time),
// K a multiple of 32 and not (padded with zeros), the last token block short.
TEST(CpuAmx, DotsGiveExactIntegerSums) {
  if (!detail::amx_usable()) GTEST_SKIP() << "no AMX-BF16 here";
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> small(-8, 8);
  for (const int64_t K : {32, 40, 48, 1040}) {
    const int64_t Kp = detail::amx_k_padded(K);
    for (int RB = 1; RB <= 2; ++RB)
      for (int nt = 1; nt <= 5; ++nt) {
        SCOPED_TRACE("K " + std::to_string(K) + ", RB " + std::to_string(RB) + ", nt " + std::to_string(nt));
        const int rows = RB * 16, tokens = nt * 16 - 5;
        std::vector<float> w(size_t(rows * K)), x(size_t(tokens * K));
        for (float& v : w) v = float(small(rng));
        for (float& v : x) v = float(small(rng));
        std::vector<uint16_t> wt(size_t(rows * Kp), 0), blocks(size_t(nt * Kp * 16), 0xFFFF);
        for (int r = 0; r < rows; ++r)
          for (int64_t k = 0; k < K; ++k) wt[r * Kp + k] = bf16_from_f32(w[r * K + k]);
        for (int t = 0; t < nt; ++t) {
          const float* rp[16];
          const int n = std::min(16, tokens - 16 * t);
          for (int c = 0; c < n; ++c) rp[c] = x.data() + (16 * t + c) * K;
          ASSERT_TRUE(detail::amx_vnni_block(rp, n, K, blocks.data() + t * Kp * 16));
        }
        std::vector<float> sums(size_t(nt * rows * 16), std::nanf(""));
        detail::amx_dots(wt.data(), RB, Kp, blocks.data(), nt, sums.data());
        for (int t = 0; t < nt; ++t)
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < 16; ++c) {
              int64_t want = 0;
              if (16 * t + c < tokens)
                for (int64_t k = 0; k < K; ++k) want += int64_t(w[r * K + k]) * int64_t(x[(16 * t + c) * K + k]);
              ASSERT_EQ(sums[(t * rows + r) * 16 + c], float(want)) << "t " << t << " r " << r << " c " << c;
            }
      }
  }
}

// A subnormal GEMM 1 input, which the tiles would read as zero, sends its expert to the vector
// path, in both GEMMs (as does one below 2^-100): all tokens on one expert (the AMX path's case), one activation
// subnormal, gives AVX-512's bits; without it the same problem sums in the tiles' order (other
// bits somewhere). The tiles' own check: amx_vnni_block refuses a subnormal, takes zeros.
TEST(CpuAmx, SubnormalInputTakesTheVectorPath) {
  if (!detail::amx_usable()) GTEST_SKIP() << "no AMX-BF16 here";
  testing::MoECase c{.name = "amx_subnormal", .H = 256, .I = 128, .E = 4, .k = 1, .T = 40,
                     .routing = testing::Routing::one_expert};
  c.seed = std::random_device{}();
  MoEProblem p = testing::make_problem(c);
  auto run = [&](const char* level) {
    const auto b = cpu_on(p, "2", level);
    return run_f32(p, b->workspace_size(p.c.T), [&](const ForwardArgs& x) { b->forward(x); });
  };
  EXPECT_FALSE(bit_equal(run("amx"), run("avx512"))) << "the tiles' order gave AVX-512's bits: the test cannot tell the paths apart";
  p.x[size_t(7 * p.c.H + 3)] = 0x0001;  // the smallest positive bf16 subnormal
  EXPECT_TRUE(bit_equal(run("amx"), run("avx512"))) << "an expert with a subnormal input ran on the tiles";
  EXPECT_LE(testing::rel_l2(run("amx"), testing::run_reference(p, DType::f32)), testing::tolerance(p.c));
  const float ok[40] = {0.0f, 0x1p-100f, -0x1p-100f, 1e30f}, subnormal[40] = {0.0f, 0x1p-127f},
              small[40] = {0.0f, 1.0f, -0x1p-101f};
  const float* rows[3] = {ok, subnormal, small};
  std::vector<uint16_t> block(size_t(detail::amx_k_padded(40)) * 16);
  EXPECT_TRUE(detail::amx_vnni_block(rows, 1, 40, block.data()));
  EXPECT_FALSE(detail::amx_vnni_block(rows, 2, 40, block.data()));
  EXPECT_FALSE(detail::amx_vnni_block(rows + 2, 1, 40, block.data()));
}

}  // namespace
}  // namespace fp4moe
