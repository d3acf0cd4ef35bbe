// The cuda backend through the public API against the scalar reference, on THE
// conformance table (tests/moe_fixtures.hpp): standard and batched formats, the default,
// the naive, splitk, stream and sm90 GEMM paths, NaN-poisoned outputs, guard bytes around out and workspace,
// determinism, CUDA-graph replay, device-side id/count errors, and forced selection on
// a machine without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "backend.hpp"
#include "cuda/cuda_test_util.hpp"
#include "cuda/decode_layer.hpp"
#include "cuda/gemm_internal.hpp"
#include "error_test_util.hpp"
#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "moe_fixtures.hpp"
#include "prepare/prepare.hpp"
#include "reference/reference.hpp"

namespace fp4moe::testing {
namespace {

// Full-size layers: the reference runs on this many leading tokens / batched rows only.
constexpr int64_t kFullSizeRefTokens = 4;
constexpr int64_t kFullSizeRefRows = 6;

// "rel_l2 ... > tol ...; worst element ..." or "" when within tolerance.
std::string compare(const std::vector<float>& got, const std::vector<float>& ref, double tol, int64_t H) {
  const double e = rel_l2(got, ref);
  if (e <= tol) return "";
  std::ostringstream os;
  os << "rel_l2 " << e << " > tolerance " << tol;
  size_t worst = 0;
  double wd = -1;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    const double d = std::isfinite(got[i]) ? std::fabs(double(got[i]) - double(ref[i])) : INFINITY;
    if (d > wd) {
      wd = d;
      worst = i;
    }
  }
  if (!got.empty())
    os << "; worst element [row " << worst / H << ", col " << worst % H << "]: got " << got[worst] << ", reference "
       << ref[worst];
  return os.str();
}

// The reference of the first n tokens (full-size layers: the CPU reference is slow).
std::vector<float> reference_tokens(const MoEProblem& p, int64_t n) {
  if (n == p.c.T) return run_reference(p, DType::f32);
  const int64_t H = p.c.H, k = p.c.k;
  std::vector<float> out(size_t(n * H));
  for (int64_t i = 0; i < n * H; ++i) out[i] = p.c.accumulate ? bf16_to_f32(p.out_init[i]) : 0.0f;
  std::vector<float> scratch(detail::reference_scratch_floats(*p.host));
  ForwardArgs a;
  a.hidden_states = TensorView::of(p.x.data(), DType::bf16, {n, H});
  a.topk_weights = TensorView::of(p.topk_weights.data(), DType::f32, {n, k});
  a.topk_ids = TensorView::of(p.topk_ids.data(), DType::i32, {n, k});
  a.out = TensorView::of(out.data(), DType::f32, {n, H});
  a.apply_router_weight_on_input = p.c.router_weight_on_input;
  a.accumulate = p.c.accumulate;
  detail::reference_forward(*p.host, a, scratch.data());
  return out;
}

// gemm: the FP4MOE_GEMM value the backend sees at prepare ("" = the default path).
Layer prepare_cuda(const MoEProblem& p, const std::string& gemm = "") {
  std::optional<EnvVar> path;
  if (!gemm.empty()) path.emplace("FP4MOE_GEMM", gemm.c_str());
  PrepareOptions o;
  o.backend = "cuda";
  return Layer::prepare(p.desc, p.weights, o);
}

class Stream {
 public:
  Stream() { TEST_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// The standard format on the device: inputs uploaded, out and workspace guarded. The
// conformance comparison reads an fp32 out (the layer's sum before any output rounding,
// SPEC §4's "exact"); a bf16 out is checked separately to be one rounding of it.
struct StandardRun {
  const MoEProblem& p;
  const Layer& layer;
  DType out_dtype;
  DeviceBuffer x, w, ids, out, ws;
  ForwardArgs args;

  StandardRun(const MoEProblem& p_, const Layer& l, const std::vector<int32_t>& topk_ids, cudaStream_t stream,
              DType out_dt = DType::f32)
      : p(p_), layer(l), out_dtype(out_dt), x(p_.x), w(p_.topk_weights), ids(topk_ids),
        out(size_t(p_.c.T * p_.c.H) * dtype_size(out_dt)), ws(l.workspace_size(p_.c.T)) {
    const int64_t T = p.c.T, H = p.c.H, k = p.c.k;
    args.hidden_states = x.view(DType::bf16, {T, H});
    args.topk_weights = w.view(DType::f32, {T, k});
    args.topk_ids = ids.view(DType::i32, {T, k});
    args.out = out.view(out_dtype, {T, H});
    args.workspace = ws.workspace_view();
    args.apply_router_weight_on_input = p.c.router_weight_on_input;
    args.accumulate = p.c.accumulate;
    args.stream = stream;
  }
  // out poisoned with NaN bytes (or set to out_init for accumulate), workspace poisoned
  void reset_out() {
    out.fill(0xFF);
    ws.fill(0xFF);
    if (p.c.accumulate) {
      if (out_dtype == DType::f32) {
        out.upload(bf16_to_float(p.out_init));
      } else if (out_dtype == DType::f16) {
        std::vector<uint16_t> h(p.out_init.size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = f16_from_f32(bf16_to_f32(p.out_init[i]));
        out.upload(h);
      } else {
        out.upload(p.out_init);
      }
    }
  }
  // out as fp32 values (bf16 outputs widened)
  std::vector<float> run() {
    reset_out();
    layer.forward(args);
    TEST_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(args.stream)));
    return download_out();
  }
  std::vector<float> download_out() const {
    if (out_dtype == DType::f32) return out.download<float>();
    const std::vector<uint16_t> narrow = out.download<uint16_t>();
    if (out_dtype == DType::bf16) return bf16_to_float(narrow);
    std::vector<float> r(narrow.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = f16_to_f32(narrow[i]);
    return r;
  }
  std::string guards() const {
    std::string g = out.guard_damage();
    if (!g.empty()) return "out: " + g;
    g = ws.guard_damage();
    return g.empty() ? "" : "workspace: " + g;
  }
};

// Batched input built from the standard problem's routing: expert e's rows are the
// tokens routed to it, in (t, j) order; rows past the count are NaN poison.
struct BatchedInput {
  int64_t L = 0, M = 1;
  std::vector<int32_t> counts;
  std::vector<uint16_t> x;                    // [L, M, H] bf16
  std::vector<uint8_t> x_fp4, x_scale;        // [L, M, H/2], [L, M, H/16] (W4A4)
};

BatchedInput make_batched(const MoEProblem& p) {
  BatchedInput b;
  const int64_t H = p.c.H, k = p.c.k, E = p.c.E;
  b.L = p.host->num_local;
  std::vector<std::vector<int64_t>> rows(size_t(b.L));
  for (int64_t s = 0; s < p.c.T * k; ++s) {
    const int32_t id = p.topk_ids[s];
    if (id < 0 || id >= E) continue;
    const int32_t e = p.expert_map.empty() ? id : p.expert_map[id];
    if (e >= 0) rows[e].push_back(s / k);
  }
  for (auto& r : rows) b.M = std::max<int64_t>(b.M, int64_t(r.size()));
  b.counts.resize(size_t(b.L));
  b.x.assign(size_t(b.L * b.M * H), 0xFFFF);
  for (int64_t e = 0; e < b.L; ++e) {
    b.counts[e] = int32_t(rows[e].size());
    for (size_t r = 0; r < rows[e].size(); ++r)
      std::memcpy(&b.x[(e * b.M + int64_t(r)) * H], &p.x[rows[e][r] * H], size_t(H) * 2);
  }
  if (p.desc.act_quant == ActQuant::nvfp4) {
    const int64_t R = b.L * b.M;
    std::vector<float> xf(size_t(R * H));
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_f32(b.x[i]);
    b.x_fp4.resize(size_t(R * H / 2));
    b.x_scale.resize(size_t(R * H / 16));
    detail::nvfp4_quantize_rows(xf.data(), R, H, 1.0f / p.host->a13_dq, b.x_fp4.data(), b.x_scale.data());
    for (int64_t e = 0; e < b.L; ++e)  // poison rows past the count (0xFF scale is NaN)
      for (int64_t r = b.counts[e]; r < b.M; ++r) {
        std::fill_n(&b.x_fp4[(e * b.M + r) * H / 2], H / 2, uint8_t(0xFF));
        std::fill_n(&b.x_scale[(e * b.M + r) * H / 16], H / 16, uint8_t(0xFF));
      }
  }
  return b;
}

// Runs the batched format (bf16 input, or NVFP4 input when fp4) on the GPU and checks it
// against reference_forward_batched; "" when everything holds.
std::string check_batched(const MoEProblem& p, const Layer& layer, const BatchedInput& b, bool fp4,
                          cudaStream_t stream) {
  const int64_t H = p.c.H, L = b.L, M = b.M;
  std::ostringstream fail;
  DeviceBuffer x(fp4 ? b.x_fp4.size() : b.x.size() * 2), xs(fp4 ? b.x_scale.size() : 0), n(b.counts),
      out(size_t(L * M * H) * 4), ws(layer.batched_workspace_size(M));
  if (fp4) {
    x.upload(b.x_fp4);
    xs.upload(b.x_scale);
  } else {
    x.upload(b.x);
  }
  ws.fill(0xFF);
  BatchedArgs a;
  a.hidden_states = fp4 ? x.view(DType::u8, {L, M, H / 2}) : x.view(DType::bf16, {L, M, H});
  if (fp4) a.hidden_scale = xs.view(DType::e4m3, {L, M, H / 16});
  a.expert_num_tokens = n.view(DType::i32, {L});
  a.out = out.view(DType::f32, {L, M, H});
  a.workspace = ws.workspace_view();
  a.stream = stream;
  layer.forward_batched(a);
  layer.check_device_errors(a.workspace, stream);
  const auto got = out.download<uint32_t>();  // fp32 bits

  // the reference on every row (small layers) or a few rows (full-size ones)
  std::vector<int32_t> ref_counts = b.counts;
  if (p.c.random_codes) {
    int64_t left = kFullSizeRefRows;
    for (auto& c : ref_counts) {
      const int32_t take = int32_t(std::min<int64_t>(left, std::min<int32_t>(c, 1)));
      c = take;
      left -= take;
    }
  }
  std::vector<float> ref(size_t(L * M * H), 0.0f);
  std::vector<float> scratch(detail::reference_scratch_floats(*p.host));
  BatchedArgs r;
  r.hidden_states = fp4 ? TensorView::of(b.x_fp4.data(), DType::u8, {L, M, H / 2})
                        : TensorView::of(b.x.data(), DType::bf16, {L, M, H});
  if (fp4) r.hidden_scale = TensorView::of(b.x_scale.data(), DType::e4m3, {L, M, H / 16});
  r.expert_num_tokens = TensorView::of(ref_counts.data(), DType::i32, {L});
  r.out = TensorView::of(ref.data(), DType::f32, {L, M, H});
  detail::reference_forward_batched(*p.host, r, scratch.data());

  std::vector<float> g, want;
  for (int64_t e = 0; e < L; ++e)
    for (int64_t row = 0; row < M; ++row) {
      const size_t at = size_t((e * M + row) * H);
      if (row < ref_counts[e]) {
        for (int64_t i = 0; i < H; ++i) {
          g.push_back(bits_f32(got[at + i]));
          want.push_back(ref[at + i]);
        }
      } else if (row >= b.counts[e]) {
        for (int64_t i = 0; i < H; ++i)
          if (got[at + i] != 0xFFFFFFFFu) {
            fail << "batched row [" << e << ", " << row << "] past its count " << b.counts[e] << " was written; ";
            i = H;
            row = M;
            e = L;
          }
      }
    }
  if (std::string c = compare(g, want, tolerance(p.c), H); !c.empty()) fail << "batched (rows of the routed tokens, "
                                                                            << "in expert order): " << c << "; ";
  if (std::string gd = out.guard_damage(); !gd.empty()) fail << "batched out: " << gd << "; ";
  if (std::string gd = ws.guard_damage(); !gd.empty()) fail << "batched workspace: " << gd << "; ";
  return fail.str();
}

class CudaLayerConformance : public ::testing::TestWithParam<MoECase> {};

TEST_P(CudaLayerConformance, MatchesReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const MoECase& c = GetParam();
  const MoEProblem p = make_problem(c);
  const int64_t T = c.T, H = c.H;
  const int64_t n_ref = c.random_codes ? std::min<int64_t>(T, kFullSizeRefTokens) : T;
  const std::vector<float> ref = reference_tokens(p, n_ref);
  const BatchedInput batched = make_batched(p);
  Stream stream;

  for (const std::string gemm : {"", "naive", "splitk", "stream", "stream_pdl", "sm90"}) {
    // Full-size layers: the naive, splitk, stream_pdl and sm90 paths are covered on every other
    // case (sm90 runs the fast path at their T of 1 and 128); preparing a 9 GB layer once more
    // for each costs a minute and checks nothing new.
    if (c.random_codes && (gemm == "naive" || gemm == "splitk" || gemm == "sm90" || gemm == "stream_pdl")) continue;
    const bool naive = gemm == "naive";
    SCOPED_TRACE(c.name + (gemm.empty() ? " [default GEMM path]" : " [FP4MOE_GEMM=" + gemm + "]"));
    // stream_pdl: the stream path with GEMM 2 launched as a programmatic dependent of GEMM 1
    // (FP4MOE_PDL=1 while this path's forwards run)
    const bool pdl = gemm == "stream_pdl";
    EnvVar pdl_env("FP4MOE_PDL", pdl ? "1" : nullptr);
    const Layer layer = prepare_cuda(p, pdl ? "stream" : gemm);
    ASSERT_EQ(layer.backend(), "cuda");
    StandardRun run(p, layer, p.topk_ids, stream.get());

    const int64_t wgmma_before = cuda::sm90_launches();
    const std::vector<float> first = run.run();
    layer.check_device_errors(run.args.workspace, stream.get());
    // sm90: the wgmma kernels ran both GEMMs where they exist (sm_90 device, sm_90a build) and
    // the shape is prefill-sized (W4A4 too: staged through bf16 in the workspace); otherwise
    // the fast path ran both.
    const int64_t E_local = c.E_local ? c.E_local : c.E;
    const bool hopper = cuda::why_no_sm90(current_device()).empty();
    auto wgmma_launches = [&](int64_t rows_bound) {
      const bool wgmma = gemm == "sm90" && hopper &&
                         cuda::choose_sm90_config({.rows_bound = rows_bound,
                                                   .num_experts = E_local,
                                                   .N = int(2 * c.I),
                                                   .K = int(c.H),
                                                   .block = detail::weight_block(c.wf)})
                             .use;
      return int64_t(wgmma ? 2 : 0);
    };
    if (gemm == "sm90")
      EXPECT_EQ(cuda::sm90_launches() - wgmma_before, wgmma_launches(T * c.k)) << "wgmma launches of one forward";
    std::vector<float> got = first;
    got.resize(size_t(n_ref * H));
    EXPECT_EQ(compare(got, ref, tolerance(c), H), "") << "standard format, first " << n_ref << " of " << T << " tokens";
    EXPECT_EQ(run.guards(), "");

    // deterministic: bit-identical run to run
    for (int rep = 1; rep < 3; ++rep) {
      const std::vector<float> again = run.run();
      EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * 4), 0)
          << "run " << rep << " differs from run 0";
    }
    // the default path launches the decode chain (GEMM 1 after the permute or the A preparation,
    // GEMM 2, the combine) as programmatic dependents (sm_90, decode_pdl), at T = 1 its GEMM 1
    // finds its experts from the top-k ids itself, and a one-kernel permute runs after the A
    // preparation as its dependent, and the fast path's GEMMs as dependents too (sm80_pdl):
    // launched normally (FP4MOE_DECODE_PDL=0, FP4MOE_SM80_PDL=0), with GEMM 1 on the permute's
    // rows (FP4MOE_DECODE_DIRECT=0), or with the permute first (FP4MOE_PREP_FIRST=0), the same
    // bits; and the fast path with a test per loaded stage throughout (FP4MOE_SM80_INSIDE_MIN_KB
    // past any K) as with the untested loads inside K
    if (gemm.empty()) {
      for (const char* var : {"FP4MOE_DECODE_PDL", "FP4MOE_SM80_PDL", "FP4MOE_DECODE_DIRECT", "FP4MOE_PREP_FIRST"}) {
        EnvVar off(var, "0");
        const std::vector<float> plain = run.run();
        EXPECT_EQ(std::memcmp(first.data(), plain.data(), first.size() * 4), 0)
            << var << "=0 differs from the default launch";
      }
      EnvVar tested("FP4MOE_SM80_INSIDE_MIN_KB", "1000000");
      const std::vector<float> plain = run.run();
      EXPECT_EQ(std::memcmp(first.data(), plain.data(), first.size() * 4), 0)
          << "FP4MOE_SM80_INSIDE_MIN_KB=1000000 (a test per stage) differs from the default";
    }

    // a CUDA graph of one forward replays to the same bits
    if (!naive) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      run.reset_out();
      TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
      try {
        layer.forward(run.args);
      } catch (...) {
        cudaStreamEndCapture(stream.get(), &graph);
        throw;
      }
      TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
      TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      for (int rep = 0; rep < 2; ++rep) {
        run.reset_out();
        TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
        TEST_CUDA(cudaStreamSynchronize(stream.get()));
        const std::vector<float> replay = run.download_out();
        EXPECT_EQ(std::memcmp(first.data(), replay.data(), first.size() * 4), 0)
            << "graph replay " << rep << " differs from eager";
      }
      (void)cudaGraphExecDestroy(exec);
      (void)cudaGraphDestroy(graph);
      EXPECT_EQ(run.guards(), "");
    }

    // batched format from the same routing (bf16 input; W4A4 also NVFP4 input); sm90: the
    // wgmma kernels decide on rows_bound = E_local * M
    const int64_t batched_before = cuda::sm90_launches();
    EXPECT_EQ(check_batched(p, layer, batched, false, stream.get()), "");
    if (gemm == "sm90")
      EXPECT_EQ(cuda::sm90_launches() - batched_before, wgmma_launches(batched.L * batched.M))
          << "wgmma launches of one batched forward";
    if (c.aq == ActQuant::nvfp4) {
      const int64_t fp4_before = cuda::sm90_launches();
      EXPECT_EQ(check_batched(p, layer, batched, true, stream.get()), "") << "NVFP4 input";
      if (gemm == "sm90")
        EXPECT_EQ(cuda::sm90_launches() - fp4_before, wgmma_launches(batched.L * batched.M))
            << "wgmma launches of one batched forward, NVFP4 input";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudaLayerConformance, ::testing::ValuesIn(conformance_cases(true)),
                         [](const ::testing::TestParamInfo<MoECase>& i) { return i.param.name; });

const MoECase& small_case(const char* name) {
  static const std::vector<MoECase> cases = conformance_cases(false);
  for (const MoECase& c : cases)
    if (c.name == name) return c;
  throw std::runtime_error(std::string("no conformance case named ") + name);
}

// Ids outside [-1, E) cannot throw from a kernel: they count as -1 (never an index)
// and check_device_errors reports them once.
TEST(CudaLayer, IdsOutOfRangeReportedAndNeverRead) {
  FP4MOE_SKIP_WITHOUT_GPU();
  for (const char* name : {"ep_map_contiguous", "qwen3_30b_half_T300"}) {
    SCOPED_TRACE(name);
    MoEProblem p = make_problem(small_case(name));
    const int64_t E = p.c.E, H = p.c.H;
    std::vector<int32_t> bad = p.topk_ids;
    for (size_t s = 1; s < bad.size(); s += 7) bad[s] = (s % 2) ? int32_t(E + s % 5) : -2 - int32_t(s % 1000000);
    bad[0] = std::numeric_limits<int32_t>::max();
    // what the layer must compute: the bad slots as -1
    for (size_t s = 0; s < bad.size(); ++s)
      if (bad[s] < -1 || bad[s] >= E) p.topk_ids[s] = -1;
    const std::vector<float> ref = run_reference(p, DType::f32);
    const Layer layer = prepare_cuda(p);
    Stream stream;
    StandardRun run(p, layer, bad, stream.get());
    const auto got = run.run();
    try {
      layer.check_device_errors(run.args.workspace, stream.get());
      ADD_FAILURE() << "check_device_errors did not throw for ids outside [-1, E)";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("topk_ids"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(layer.check_device_errors(run.args.workspace, stream.get())) << "the status was not cleared";
    EXPECT_EQ(compare(got, ref, tolerance(p.c), H), "");
    EXPECT_EQ(run.guards(), "");
  }
}

TEST(CudaLayer, BatchedCountAboveMReported) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const MoEProblem p = make_problem(small_case("qwen3_30b_half_T300"));
  const Layer layer = prepare_cuda(p);
  const int64_t L = p.host->num_local, M = 4, H = p.c.H;
  std::vector<int32_t> counts(size_t(L), 2);
  counts[1] = int32_t(M + 3);
  std::vector<uint16_t> x(size_t(L * M * H));
  for (size_t i = 0; i < x.size(); ++i) x[i] = p.x[i % p.x.size()];
  DeviceBuffer dx(x), dn(counts), out(x.size() * 2), ws(layer.batched_workspace_size(M));
  BatchedArgs a;
  a.hidden_states = dx.view(DType::bf16, {L, M, H});
  a.expert_num_tokens = dn.view(DType::i32, {L});
  a.out = out.view(DType::bf16, {L, M, H});
  a.workspace = ws.workspace_view();
  layer.forward_batched(a);
  try {
    layer.check_device_errors(a.workspace, nullptr);
    ADD_FAILURE() << "check_device_errors did not throw for a count above M";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("expert_num_tokens"), std::string::npos) << e.what();
  }
  const auto got = out.download<uint16_t>();
  for (int64_t e = 0; e < L; ++e)
    for (int64_t r = 0; r < M; ++r) {
      const bool live = r < std::min<int64_t>(counts[e], M);
      const bool poison = got[size_t((e * M + r) * H)] == 0xFFFF;
      EXPECT_NE(live, poison) << "row [" << e << ", " << r << "]";
    }
  EXPECT_EQ(out.guard_damage(), "");
  EXPECT_EQ(ws.guard_damage(), "");
}

// bf16 and f16 outputs are one rounding of the fp32 output (SPEC §4: only the final
// rounding differs; the fp32 output is held to the reference by the conformance table).
TEST(CudaLayer, NarrowOutputsAreOneRoundingOfTheFp32Output) {
  FP4MOE_SKIP_WITHOUT_GPU();
  for (const char* name : {"qwen3_30b_T64", "accumulate", "accumulate_mxfp4", "odd_T67_w4a4"}) {
    SCOPED_TRACE(name);
    const MoEProblem p = make_problem(small_case(name));
    const Layer layer = prepare_cuda(p);
    Stream stream;
    StandardRun wide(p, layer, p.topk_ids, stream.get(), DType::f32);
    const std::vector<float> f32 = wide.run();
    for (DType narrow : {DType::bf16, DType::f16}) {
      StandardRun run(p, layer, p.topk_ids, stream.get(), narrow);
      const std::vector<float> got = run.run();
      size_t bad = 0, first_bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const float want = narrow == DType::bf16 ? round_bf16(f32[i]) : f16_to_f32(f16_from_f32(f32[i]));
        if (std::memcmp(&want, &got[i], 4) != 0 && bad++ == 0) first_bad = i;
      }
      EXPECT_EQ(bad, 0u) << dtype_name(narrow) << ": first at " << first_bad << ": got " << got[first_bad]
                         << ", one rounding of " << f32[first_bad];
      EXPECT_EQ(run.guards(), "");
    }
  }
}

// The decode chain at T = 1, whose GEMM 1 finds its experts from the top-k ids, at every slice
// count its K allow (cuda::set_decode_splits 2..16; H = 1024 and I = 512: 16 and 8 k-blocks),
// against the reference: NVFP4 W4A16 and W4A4, MXFP4 with swiglu_oai and biases.
TEST(CudaLayer, OneTokenAtEverySliceCount) {
  FP4MOE_SKIP_WITHOUT_GPU();
  // the chain, not the one-kernel layer that runs T = 1 by default on an H100 / H200
  const ChoiceScope<int, cuda::decode_layer_tokens, cuda::set_decode_layer_tokens> chain(0);
  const MoECase cases[] = {
      {.name = "t1_slices", .H = 1024, .I = 512, .E = 16, .k = 4, .T = 1, .seed = 48},
      {.name = "t1_slices_w4a4", .H = 1024, .I = 512, .E = 16, .k = 8, .T = 1, .aq = ActQuant::nvfp4, .seed = 49},
      {.name = "t1_slices_mxfp4", .H = 1024, .I = 512, .E = 16, .k = 4, .T = 1, .wf = WeightFormat::mxfp4,
       .act = Activation::swiglu_oai, .bias = true, .seed = 50}};
  Stream stream;
  for (const MoECase& c : cases) {
    SCOPED_TRACE(c.name);
    const MoEProblem p = make_problem(c);
    const std::vector<float> ref = reference_tokens(p, 1);
    const Layer layer = prepare_cuda(p);
    for (int s = 2; s <= cuda::kDecodeMaxSplits; ++s) {
      SCOPED_TRACE("slices " + std::to_string(s));
      const ChoiceScope<int, cuda::decode_splits, cuda::set_decode_splits> forced(s);
      StandardRun run(p, layer, p.topk_ids, stream.get());
      const int64_t before = cuda::decode_launches();
      const std::vector<float> got = run.run();
      EXPECT_EQ(cuda::decode_launches() - before, 2) << "the decode kernels run both GEMMs";
      EXPECT_EQ(compare(got, ref, tolerance(c), c.H), "");
      EXPECT_EQ(run.guards(), "");
    }
  }
}

// The one-kernel layer (cuda/decode_layer.hpp), allowed up to kLayerMaxTokens tokens here, on
// every conformance case it takes (T <= 8: the three weight formats with their activations,
// W4A4, expert maps, -1 ids, an expert named twice, the router weight on the input, accumulate)
// and on shapes of its own: H / 16 odd with K past the last whole k-block, and an expert with
// more slots than one group holds. Each: exactly one launch, the reference's values, nothing
// written outside out and the workspace, the same bits run to run, and ids outside [-1, E)
// reported and taken as -1. Skips where the device cannot run it (not sm_90).
TEST(CudaLayer, OneKernelLayerMatchesReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (const std::string why = cuda::decode_layer_why_no_device(current_device()); !why.empty()) GTEST_SKIP() << why;
  const ChoiceScope<int, cuda::decode_layer_tokens, cuda::set_decode_layer_tokens> upto(cuda::kLayerMaxTokens);
  std::vector<MoECase> cases;
  cases.push_back({.name = "one_kernel_small_T1", .H = 256, .I = 128, .E = 4, .k = 2, .T = 1, .seed = 60});
  cases.push_back({.name = "one_kernel_odd_shape_T8", .H = 336, .I = 80, .E = 8, .k = 2, .T = 8, .seed = 61});
  cases.push_back({.name = "one_kernel_odd_shape_mxfp4_T3", .H = 288, .I = 96, .E = 8, .k = 2, .T = 3,
                   .wf = WeightFormat::mxfp4, .act = Activation::swiglu_oai, .bias = true, .seed = 62});
  cases.push_back({.name = "one_kernel_expert_over_a_group_T8", .H = 256, .I = 128, .E = 2, .k = 2, .T = 8,
                   .routing = Routing::repeated, .seed = 63});
  cases.push_back({.name = "one_kernel_expert_over_a_group_w4a4_T8", .H = 256, .I = 128, .E = 3, .k = 3, .T = 8,
                   .aq = ActQuant::nvfp4, .routing = Routing::repeated, .seed = 64});
  cases.push_back({.name = "one_kernel_64_slots_T8", .H = 512, .I = 256, .E = 64, .k = 8, .T = 8, .seed = 65});
  const size_t own = cases.size();
  for (const MoECase& c : conformance_cases(false))
    if (c.T <= cuda::kLayerMaxTokens && c.T * c.k <= cuda::kLayerMaxSlots) cases.push_back(c);
  EXPECT_GE(cases.size() - own, 15u) << "the table's cases of at most 8 tokens";
  Stream stream;
  for (const MoECase& c : cases) {
    SCOPED_TRACE(c.name);
    const MoEProblem p = make_problem(c);
    const std::vector<float> ref = run_reference(p, DType::f32);
    const Layer layer = prepare_cuda(p);
    StandardRun run(p, layer, p.topk_ids, stream.get());
    const int64_t before = cuda::decode_layer_launches(), chain_before = cuda::decode_launches();
    const std::vector<float> first = run.run();
    EXPECT_EQ(cuda::decode_layer_launches() - before, 1) << "one kernel for the layer";
    EXPECT_EQ(cuda::decode_launches() - chain_before, 0) << "no decode GEMM of the chain";
    EXPECT_NO_THROW(layer.check_device_errors(run.args.workspace, stream.get()));
    EXPECT_EQ(compare(first, ref, tolerance(c), c.H), "");
    EXPECT_EQ(run.guards(), "");
    const std::vector<float> again = run.run();
    EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * 4), 0) << "the second run differs";
  }

  // ids outside [-1, E): reported once, computed as -1
  MoEProblem p = make_problem(cases[1]);  // 16 slots
  std::vector<int32_t> bad = p.topk_ids;
  bad[0] = int32_t(p.c.E + 3);
  bad[5] = -7;
  bad[bad.size() - 1] = std::numeric_limits<int32_t>::max();
  for (size_t s = 0; s < bad.size(); ++s)
    if (bad[s] < -1 || bad[s] >= p.c.E) p.topk_ids[s] = -1;
  const std::vector<float> ref = run_reference(p, DType::f32);
  const Layer layer = prepare_cuda(p);
  StandardRun run(p, layer, bad, stream.get());
  const int64_t before = cuda::decode_layer_launches();
  const std::vector<float> got = run.run();
  EXPECT_EQ(cuda::decode_layer_launches() - before, 1);
  try {
    layer.check_device_errors(run.args.workspace, stream.get());
    ADD_FAILURE() << "check_device_errors did not throw for ids outside [-1, E)";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_ids"), std::string::npos) << e.what();
  }
  EXPECT_EQ(compare(got, ref, tolerance(p.c), p.c.H), "");
  EXPECT_EQ(run.guards(), "");
}

// The one-kernel layer and the chain it replaces agree within the fp32 sums' reordering, and
// FP4MOE_DECODE_LAYER's setter turns it off: at T = 1 on kimi-k2's shape (8 experts of 10).
TEST(CudaLayer, OneKernelLayerAgreesWithTheChain) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (const std::string why = cuda::decode_layer_why_no_device(current_device()); !why.empty()) GTEST_SKIP() << why;
  const MoEProblem p = make_problem(small_case("kimi_k2_T1"));
  const Layer layer = prepare_cuda(p);
  Stream stream;
  StandardRun run(p, layer, p.topk_ids, stream.get());
  std::vector<float> one, chain;
  {
    const ChoiceScope<int, cuda::decode_layer_tokens, cuda::set_decode_layer_tokens> on(1);
    const int64_t before = cuda::decode_layer_launches();
    one = run.run();
    EXPECT_EQ(cuda::decode_layer_launches() - before, 1);
  }
  {
    const ChoiceScope<int, cuda::decode_layer_tokens, cuda::set_decode_layer_tokens> off(0);
    const int64_t before = cuda::decode_layer_launches();
    chain = run.run();
    EXPECT_EQ(cuda::decode_layer_launches() - before, 0);
  }
  EXPECT_EQ(compare(one, chain, 1e-5, p.c.H), "");
}

// Every CUDA tensor's data pointer must be memory the layer's device reaches (validate.cpp's
// expect_device_memory). A host buffer labelled cuda fails naming its argument, with nothing
// written, where the device does not read pageable host memory; where it does (HMM, ATS) the
// forward runs on it. Pinned and managed buffers run, with the device buffers' bits; another
// GPU's memory labelled as this one's fails (two GPUs only).
TEST(CudaLayer, ForwardTakesOnlyMemoryItsDeviceReaches) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const MoEProblem p = make_problem(small_case("qwen3_30b_T64"));
  const Layer layer = prepare_cuda(p);
  Stream stream;
  StandardRun run(p, layer, p.topk_ids, stream.get());
  const std::vector<float> want = run.run();
  ASSERT_EQ(compare(want, run_reference(p, DType::f32), tolerance(p.c), p.c.H), "");
  const int device = current_device();
  int pageable = 0;
  TEST_CUDA(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device));
  auto same_bits = [&](const std::vector<float>& got) {
    return got.size() == want.size() && std::memcmp(got.data(), want.data(), want.size() * 4) == 0;
  };
  auto poisoned = [&] {
    for (uint8_t b : run.out.download<uint8_t>())
      if (b != 0xFF) return false;
    return true;
  };
  // each argument in turn on a host buffer holding what its device buffer holds (out: poison)
  struct Arg {
    const char* name;
    TensorView ForwardArgs::*view;
    const DeviceBuffer* buffer;
  };
  const Arg args[] = {{"hidden_states", &ForwardArgs::hidden_states, &run.x},
                      {"topk_weights", &ForwardArgs::topk_weights, &run.w},
                      {"topk_ids", &ForwardArgs::topk_ids, &run.ids},
                      {"out", &ForwardArgs::out, &run.out},
                      {"workspace", &ForwardArgs::workspace, &run.ws}};
  for (const Arg& arg : args) {
    SCOPED_TRACE(arg.name);
    run.reset_out();
    std::vector<uint8_t> bytes = arg.buffer->download<uint8_t>();
    std::vector<uint64_t> host((bytes.size() + 7) / 8);  // 8-byte aligned; 16 by malloc
    std::memcpy(host.data(), bytes.data(), bytes.size());
    ASSERT_EQ(reinterpret_cast<uintptr_t>(host.data()) % 16, 0u);
    ForwardArgs a = run.args;
    (a.*arg.view).data = host.data();
    if (!pageable) {
      const std::string m = error_of([&] { layer.forward(a); }, ErrorKind::invalid_argument);
      EXPECT_NE(m.find(std::string("Layer::forward: ") + arg.name + ": got"), std::string::npos) << m;
      EXPECT_NE(m.find("host memory, not a CUDA allocation"), std::string::npos) << m;
      TEST_CUDA(cudaStreamSynchronize(stream.get()));
      EXPECT_TRUE(poisoned()) << "out was written by a call that failed";
    } else {
      layer.forward(a);
      TEST_CUDA(cudaStreamSynchronize(stream.get()));
      std::vector<float> got(want.size());
      if (arg.view == &ForwardArgs::out) std::memcpy(got.data(), host.data(), got.size() * 4);
      else got = run.download_out();
      EXPECT_TRUE(same_bits(got)) << "the forward on pageable host memory differs from the device buffers'";
    }
    EXPECT_EQ(run.guards(), "");
  }
  // pinned hidden states and managed ids and out: the device buffers' bits
  {
    const size_t xb = p.x.size() * 2, idb = p.topk_ids.size() * 4, ob = want.size() * 4;
    void *px = nullptr, *mids = nullptr, *mout = nullptr;
    TEST_CUDA(cudaMallocHost(&px, xb));
    TEST_CUDA(cudaMallocManaged(&mids, idb));
    TEST_CUDA(cudaMallocManaged(&mout, ob));
    std::memcpy(px, p.x.data(), xb);
    std::memcpy(mids, p.topk_ids.data(), idb);
    std::memset(mout, 0xFF, ob);
    ForwardArgs a = run.args;
    a.hidden_states.data = px;
    a.topk_ids.data = mids;
    a.out.data = mout;
    EXPECT_NO_THROW(layer.forward(a));
    TEST_CUDA(cudaStreamSynchronize(stream.get()));
    std::vector<float> got(want.size());
    std::memcpy(got.data(), mout, ob);
    EXPECT_TRUE(same_bits(got)) << "pinned / managed buffers gave other bits than device buffers";
    TEST_CUDA(cudaFreeHost(px));
    TEST_CUDA(cudaFree(mids));
    TEST_CUDA(cudaFree(mout));
  }
  // batched: host counts labelled cuda
  if (!pageable) {
    const int64_t L = p.host->num_local, M = 4, H = p.c.H;
    std::vector<int32_t> counts(size_t(L), 2);
    DeviceBuffer dx(size_t(L * M * H) * 2), out(size_t(L * M * H) * 2), ws(layer.batched_workspace_size(M));
    BatchedArgs a;
    a.hidden_states = dx.view(DType::bf16, {L, M, H});
    a.expert_num_tokens = TensorView::of(counts.data(), DType::i32, {L}, DeviceType::cuda, device);
    a.out = out.view(DType::bf16, {L, M, H});
    a.workspace = ws.workspace_view();
    const std::string m = error_of([&] { layer.forward_batched(a); }, ErrorKind::invalid_argument);
    EXPECT_NE(m.find("Layer::forward_batched: expert_num_tokens: got"), std::string::npos) << m;
    for (uint8_t b : out.download<uint8_t>()) ASSERT_EQ(b, 0xFF) << "out was written by a call that failed";
  }
  int devices = 0;
  TEST_CUDA(cudaGetDeviceCount(&devices));
  if (devices >= 2) {
    const int other = (device + 1) % devices;
    void* q = nullptr;
    TEST_CUDA(cudaSetDevice(other));
    TEST_CUDA(cudaMalloc(&q, p.x.size() * 2));
    TEST_CUDA(cudaSetDevice(device));
    ForwardArgs a = run.args;
    a.hidden_states.data = q;
    const std::string m = error_of([&] { layer.forward(a); }, ErrorKind::invalid_argument);
    EXPECT_NE(m.find("memory of cuda:" + std::to_string(other)), std::string::npos) << m;
    TEST_CUDA(cudaFree(q));
  }
}

// The check looks at a CUDA tensor's last byte too. In an 8 MiB buffer, out as a view that ends
// where the buffer ends runs (the device buffers' bits); the same view moved half its length on,
// its second half past the buffer, fails naming out, with nothing written; so does hidden_states
// past the same end. The buffer is pinned host memory (registered, mapped: the first 8 MiB of a
// mapping of 9, so that what follows it is plain host memory), where the refusal is asserted
// unless the device reads pageable memory; then device memory (cudaMalloc), where it is asserted
// only when the runtime places no memory right after it (on the v72 H100 the next allocation lay
// there, which two ends cannot tell apart).
TEST(CudaLayer, ForwardRefusesAViewRunningPastItsAllocation) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const MoEProblem p = make_problem(small_case("qwen3_30b_T64"));
  const Layer layer = prepare_cuda(p);
  Stream stream;
  StandardRun run(p, layer, p.topk_ids, stream.get());
  const std::vector<float> want = run.run();
  const size_t ob = want.size() * 4, xb = p.x.size() * 2, alloc = size_t(8) << 20, extra = size_t(1) << 20;
  ASSERT_EQ(ob % 32, 0u);
  ASSERT_EQ(xb % 32, 0u);
  ASSERT_LE(std::max(ob, xb), extra);
  const int device = current_device();
  int pageable = 0, host_pointer = 0;
  TEST_CUDA(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device));
  TEST_CUDA(cudaDeviceGetAttribute(&host_pointer, cudaDevAttrCanUseHostPointerForRegisteredMem, device));
  for (const bool pinned : {true, false}) {
    SCOPED_TRACE(pinned ? "pinned" : "device");
    if (pinned && !host_pointer) continue;  // its device view would sit elsewhere: refused whole
    void* big = nullptr;
    if (pinned) {
      big = mmap(nullptr, alloc + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(big, MAP_FAILED);
      TEST_CUDA(cudaHostRegister(big, alloc, cudaHostRegisterMapped));
    } else {
      TEST_CUDA(cudaMalloc(&big, alloc));
    }
    char* const end = static_cast<char*>(big) + alloc;
    auto tail = [&](size_t n) {
      std::vector<uint8_t> h(n);
      TEST_CUDA(cudaMemcpy(h.data(), end - n, n, cudaMemcpyDefault));
      return h;
    };
    auto poison = [&] {
      if (pinned) std::memset(big, 0xFF, alloc);
      else TEST_CUDA(cudaMemset(big, 0xFF, alloc));
      TEST_CUDA(cudaDeviceSynchronize());
    };
    poison();
    ForwardArgs a = run.args;
    a.out.data = end - ob;
    EXPECT_NO_THROW(layer.forward(a));
    TEST_CUDA(cudaStreamSynchronize(stream.get()));
    const std::vector<uint8_t> got = tail(ob);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), ob), 0) << "a view ending at its buffer's end gave other bits";

    cudaPointerAttributes after{};
    TEST_CUDA(cudaPointerGetAttributes(&after, end));
    const bool can_tell = !pageable && after.type == cudaMemoryTypeUnregistered;
    if (pinned && !pageable) EXPECT_TRUE(can_tell) << "memory type after the registered range: " << int(after.type);
    if (can_tell) {
      poison();
      a.out.data = end - ob / 2;
      const std::string m = error_of([&] { layer.forward(a); }, ErrorKind::invalid_argument);
      EXPECT_NE(m.find("Layer::forward: out: got"), std::string::npos) << m;
      EXPECT_NE(m.find("runs past its allocation: its last byte, " + std::to_string(ob - 1) +
                       " bytes on, is host memory"),
                std::string::npos)
          << m;
      TEST_CUDA(cudaStreamSynchronize(stream.get()));
      for (uint8_t b : tail(ob)) ASSERT_EQ(b, 0xFF) << "the buffer was written by a call that failed";
      a = run.args;
      a.hidden_states.data = end - xb / 2;
      const std::string mx = error_of([&] { layer.forward(a); }, ErrorKind::invalid_argument);
      EXPECT_NE(mx.find("Layer::forward: hidden_states: got"), std::string::npos) << mx;
      EXPECT_NE(mx.find("runs past its allocation"), std::string::npos) << mx;
    }
    if (pinned) {
      TEST_CUDA(cudaHostUnregister(big));
      ASSERT_EQ(munmap(big, alloc + extra), 0);
    } else {
      TEST_CUDA(cudaFree(big));
    }
  }
}

// T == 0 and M == 0: no work, no workspace, nothing launched.
TEST(CudaLayer, EmptyBatchesNeedNoWorkspace) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const MoEProblem p = make_problem(small_case("odd_shape_nvfp4"));
  const Layer layer = prepare_cuda(p);
  EXPECT_EQ(layer.workspace_size(0), 0u);
  EXPECT_EQ(layer.batched_workspace_size(0), 0u);
  EXPECT_GT(layer.workspace_size(1), 0u);
}

// The cuda backend keeps no host copy of the weights: the HostWeights it is built from are
// released once it exists (one kimi-k2 layer is ~9.5 GB of host memory), W4A16 and W4A4 (whose
// activation scales it keeps by value). Every other CUDA layer test runs a backend built so.
TEST(CudaLayer, BackendReleasesTheHostWeights) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const detail::BackendEntry* cuda = nullptr;
  for (const detail::BackendEntry& e : detail::registry())
    if (std::string(e.name) == "cuda") cuda = &e;
  ASSERT_NE(cuda, nullptr);
  for (const char* name : {"odd_shape_nvfp4", "odd_T67_w4a4"}) {
    SCOPED_TRACE(name);
    const MoEProblem p = make_problem(small_case(name));
    std::shared_ptr<const detail::HostWeights> host = detail::prepare_host_weights(p.desc, p.weights);
    const std::weak_ptr<const detail::HostWeights> watch = host;
    PrepareOptions o;
    o.device = 0;
    const std::unique_ptr<detail::Backend> backend = cuda->create(std::move(host), o);
    ASSERT_NE(backend, nullptr);
    EXPECT_TRUE(watch.expired()) << "the backend still holds " << watch.use_count() << " reference(s)";
  }
}

// Forcing the cuda backend where there is no GPU is refused, saying why and what is
// available. Runs only on machines without a GPU.
TEST(CudaSelection, ForcedCudaWithoutGpuSaysWhyAndWhatIsAvailable) {
  if (cuda_present()) GTEST_SKIP() << "a CUDA device is present";
  const MoEProblem p = make_problem(small_case("odd_shape_nvfp4"));
  PrepareOptions o;
  o.backend = "cuda";
  try {
    (void)Layer::prepare(p.desc, p.weights, o);
    ADD_FAILURE() << "prepare with backend cuda succeeded without a GPU";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::unsupported) << m;
    EXPECT_NE(m.find("cuda"), std::string::npos) << m;
    const bool says_why = m.find("no CUDA device") != std::string::npos ||
                          m.find("no usable CUDA driver") != std::string::npos ||
                          m.find("CUDA runtime cannot start") != std::string::npos;
    EXPECT_TRUE(says_why) << m;
    EXPECT_NE(m.find("reference"), std::string::npos) << "the message should list what is available: " << m;
  }
}

}  // namespace
}  // namespace fp4moe::testing
