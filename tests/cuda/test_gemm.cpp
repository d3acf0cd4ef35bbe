// The CUDA grouped GEMMs (src/cuda/gemm.hpp), every path, against a host computation
// written here: weights decoded from the canonical HostWeights with this file's own e2m1
// table, double accumulation. Skips without a GPU (except the config tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/common/device.hpp"
#include "cuda/cuda_test_util.hpp"
#include "cuda/gemm.hpp"
#include "cuda/gemm_internal.hpp"
#include "format/quant.hpp"
#include "pattern_slices.hpp"
#include "prepare/prepare.hpp"

namespace fp4moe::cuda {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

void ck(cudaError_t e, const char* what) { ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e); }

constexpr double kE2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
double e2m1(uint8_t c) { return (c & 8) ? -kE2m1[c & 7] : kE2m1[c & 7]; }

// A device buffer with 4 KiB of 0xA5 on both sides and 0xA5 inside (poison).
constexpr size_t kGuard = 4096;
constexpr uint8_t kPoison = 0xA5;
struct Guarded {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  explicit Guarded(size_t n) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&base, n + 2 * kGuard), cudaSuccess);
    EXPECT_EQ(cudaMemset(base, kPoison, n + 2 * kGuard), cudaSuccess);
  }
  ~Guarded() { cudaFree(base); }
  Guarded(const Guarded&) = delete;
  template <class T>
  T* ptr() const { return reinterpret_cast<T*>(base + kGuard); }
  std::vector<uint8_t> all() const {  // guard + payload + guard
    std::vector<uint8_t> h(bytes + 2 * kGuard);
    EXPECT_EQ(cudaMemcpy(h.data(), base, h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};
template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(const std::vector<T>& h) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(h.size(), 1) * sizeof(T)), cudaSuccess);
    if (!h.empty()) EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
};

// ---------------------------------------------------------------------------
// A problem: weights, expert rows, A operand
// ---------------------------------------------------------------------------
struct Spec {
  std::string name;
  int64_t H, I, E;
  WeightFormat wf = WeightFormat::nvfp4;
  bool w4a4 = false;
  Activation act = Activation::silu;
  bool bias = false;
  std::vector<int32_t> counts;  // rows per expert (size E)
  bool batched = false;         // begin[e] = e * M (gaps), identity gather; else packed + gather
  uint64_t seed = 1;
  bool decode = false;          // <= 8 rows per expert and K long enough: the splitk path must split
  bool large = false;           // >= 64 rows per active expert: the sm90 path must choose its wgmma kernels
  int gate_gain_log2 = 0;       // GEMM 1's weights times 2^this: gates of hundreds, past the epilogues' straight-line route
};
std::string describe(const Spec& s) {
  std::ostringstream o;
  o << s.name << " (H=" << s.H << " I=" << s.I << " E=" << s.E << " " << to_string(s.wf)
    << (s.w4a4 ? " W4A4" : " W4A16") << " " << to_string(s.act) << (s.bias ? " +bias" : "")
    << (s.batched ? " batched" : " permuted") << ", counts:";
  for (int c : s.counts) o << " " << c;
  return o.str() + ")";
}

struct Problem {
  Spec s;
  detail::HostWeights w;
  std::vector<int32_t> begin, count;
  int64_t rows_bound = 0, row_space = 0, T = 0;
  std::vector<int32_t> gather;   // [row_space] source row of A (-1: no expert row)
  std::vector<uint16_t> a_bf16;  // [T, H]
  std::vector<uint8_t> a_fp4, a_scale;
  float a_dq = 1.0f;
};

// e4m3 scale codes of moderate magnitude (2^-6 .. 2^3), some subnormal and zero.
uint8_t random_e4m3(std::mt19937_64& rng) {
  const uint32_t r = uint32_t(rng() % 64);
  if (r == 0) return 0;
  if (r < 4) return uint8_t(rng() % 8);  // subnormal
  return uint8_t(0x08 + rng() % (0x50 - 0x08));
}

Problem make_problem(const Spec& s) {
  Problem p;
  p.s = s;
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t E = s.E, H = s.H, I = s.I;
  auto& w = p.w;
  w.desc.hidden = H;
  w.desc.intermediate = I;
  w.desc.num_experts = E;
  w.desc.top_k = 1;
  w.desc.weight_format = s.wf;
  w.desc.act_quant = s.w4a4 ? ActQuant::nvfp4 : ActQuant::none;
  w.desc.activation = s.act;
  w.num_local = E;
  w.block = s.wf == WeightFormat::nvfp4 ? 16 : 32;
  auto bytes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
  };
  auto scales = [&](size_t n) {
    std::vector<uint8_t> v(n);
    // NVFP4 weight scales: some negative too (the prepared layout folds the sign into the codes)
    for (auto& b : v)
      b = s.wf == WeightFormat::nvfp4 ? uint8_t(random_e4m3(rng) | (rng() % 8 == 0 ? 0x80 : 0))
                                      : uint8_t(110 + rng() % 12);
    return v;
  };
  auto host = [](const std::vector<uint8_t>& v) { return detail::HostBytes(v.begin(), v.end()); };
  w.w13 = host(bytes(size_t(E * 2 * I * H / 2)));
  w.w13_scale = host(scales(size_t(E * 2 * I * H / w.block)));
  if (s.wf == WeightFormat::mxfp4)
    for (auto& c : w.w13_scale) c = uint8_t(c + s.gate_gain_log2);  // e8m0: the exponent
  w.w2 = host(bytes(size_t(E * H * I / 2)));
  w.w2_scale = host(scales(size_t(E * H * I / w.block)));
  for (int64_t e = 0; e < E; ++e) {
    w.w13_dq.push_back(s.wf == WeightFormat::nvfp4 ? std::ldexp(1e-3f * (1.0f + float(e)), s.gate_gain_log2) : 1.0f);
    w.w2_dq.push_back(s.wf == WeightFormat::nvfp4 ? 2e-3f / (1.0f + float(e)) : 1.0f);
  }
  if (s.bias) {
    for (int64_t i = 0; i < E * 2 * I; ++i) w.w13_bias.push_back(normal(rng));
    for (int64_t i = 0; i < E * H; ++i) w.w2_bias.push_back(normal(rng));
  }
  // Rows.
  const int32_t M = s.batched ? *std::max_element(s.counts.begin(), s.counts.end()) + 3 : 0;
  int32_t next = 0;
  for (int64_t e = 0; e < E; ++e) {
    p.count.push_back(s.counts[e]);
    if (s.batched) p.begin.push_back(int32_t(e) * M);
    else {
      p.begin.push_back(next);
      next += s.counts[e];
    }
    p.rows_bound += s.counts[e];
  }
  p.rows_bound += 5;  // an upper bound, not the exact sum
  p.row_space = s.batched ? E * M : next + 2;  // 2 trailing rows of no expert
  // A: batched reads row r itself; permuted reads a random token (repeats allowed, as top-k).
  p.T = s.batched ? p.row_space : std::max<int64_t>(1, next / 2 + 1);
  p.gather.assign(size_t(p.row_space), -1);
  for (int64_t e = 0; e < E; ++e)
    for (int32_t j = 0; j < s.counts[e]; ++j) {
      const int64_t r = p.begin[e] + j;
      p.gather[r] = s.batched ? int32_t(r) : int32_t(rng() % uint64_t(p.T));
    }
  if (s.w4a4) {
    p.a_fp4 = bytes(size_t(p.T * H / 2));
    p.a_scale.resize(size_t(p.T * H / 16));
    for (auto& b : p.a_scale) b = random_e4m3(rng);
    p.a_dq = 0.37f;
  } else {
    p.a_bf16.resize(size_t(p.T * H));
    for (auto& v : p.a_bf16) v = bf16_from_f32(normal(rng));
  }
  return p;
}

// Canonical weight (expert e, row n, k) with its dq_scale, exact in double.
double weight(const detail::HostBytes& data, const detail::HostBytes& scale, const std::vector<float>& dq,
              int block, int64_t e, int64_t rows, int64_t K, int64_t n, int64_t k) {
  const uint8_t byte = data[size_t((e * rows + n) * (K / 2) + k / 2)];
  const uint8_t code = (k & 1) ? byte >> 4 : byte & 15;
  const uint8_t sc = scale[size_t((e * rows + n) * (K / block) + k / block)];
  const double sv = block == 16 ? double(e4m3_to_f32(sc)) : std::ldexp(1.0, int(sc) - 127);
  return e2m1(code) * sv * double(dq[size_t(e)]);
}

// A operand element as the GEMM sees it (dq_scale included).
struct AOperand {
  const uint16_t* bf16 = nullptr;
  const uint8_t* fp4 = nullptr;
  const uint8_t* scale = nullptr;
  double dq = 1.0;
  int64_t K = 0;
  double at(int64_t row, int64_t k) const {
    if (bf16) return double(bf16_to_f32(bf16[row * K + k]));
    const uint8_t byte = fp4[row * (K / 2) + k / 2];
    return e2m1((k & 1) ? byte >> 4 : byte & 15) * double(e4m3_to_f32(scale[row * (K / 16) + k / 16])) * dq;
  }
};

double act(const LayerDesc& d, double g, double u) {
  if (d.activation == Activation::silu) return g / (1.0 + std::exp(-g)) * u;
  const double L = d.swiglu_limit;
  g = std::min(g, L);
  u = std::min(std::max(u, -L), L);
  return (u + 1.0) * g / (1.0 + std::exp(-double(d.swiglu_alpha) * g));
}

double bf16_ulp(double x) {
  const double a = std::fabs(x);
  if (a < 1e-30) return 1e-38;
  return std::ldexp(1.0, int(std::floor(std::log2(a))) - 7);
}

// Rows r of no expert: their bytes must still be poison.
std::vector<bool> covered_rows(const Problem& p) {
  std::vector<bool> c(size_t(p.row_space), false);
  for (size_t e = 0; e < p.count.size(); ++e)
    for (int32_t j = 0; j < p.count[e]; ++j) c[size_t(p.begin[e] + j)] = true;
  return c;
}

// Every byte of an output buffer outside the covered rows (guards included) is poison.
void expect_untouched(const std::vector<uint8_t>& all, const std::vector<bool>& covered, size_t row_bytes,
                      const std::string& what) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool payload = i >= kGuard && i < all.size() - kGuard;
    if (payload && covered[(i - kGuard) / row_bytes]) continue;
    if (all[i] != kPoison && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " bytes outside the experts' rows were written; first at byte "
                     << (long long)first - (long long)kGuard << " of the payload";
}

struct Gemm1Out {
  std::vector<uint8_t> h, fp4, scale;  // guard + payload + guard each (h, fp4: logical rows)
};

// h's rows as gemm1 writes them, k-permuted (gemm_internal.hpp kperm_index: kperm_row(I)
// entries, a pair of entries pair_bytes bytes: 4 bf16, 1 NVFP4), <-> logical rows of I entries;
// guards kept (guard + payload + guard). To logical drops the padding; to k-permuted zeroes it.
std::vector<uint8_t> logical_from_kperm(const std::vector<uint8_t>& all, int64_t rows, int64_t I, int pair_bytes) {
  const int64_t Ir = kperm_row(I), in_row = Ir / 2 * pair_bytes, out_row = I / 2 * pair_bytes;
  std::vector<uint8_t> out(size_t(rows * out_row) + 2 * kGuard);
  std::copy(all.begin(), all.begin() + kGuard, out.begin());
  std::copy(all.end() - kGuard, all.end(), out.end() - kGuard);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < I / 2; ++m)
      std::memcpy(&out[kGuard + size_t(r * out_row + m * pair_bytes)],
                  &all[kGuard + size_t(r * in_row + kperm_index(2 * m) / 2 * pair_bytes)], size_t(pair_bytes));
  return out;
}
template <class T>
std::vector<T> kperm_from_logical(const std::vector<T>& logical, int64_t rows, int64_t I, int pair_bytes) {
  if (logical.empty()) return logical;
  const int64_t Ir = kperm_row(I), in_row = I / 2 * pair_bytes, out_row = Ir / 2 * pair_bytes;
  std::vector<T> out(size_t(rows * out_row) / sizeof(T), T(0));
  const auto* src = reinterpret_cast<const uint8_t*>(logical.data());
  auto* dst = reinterpret_cast<uint8_t*>(out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < I / 2; ++m)
      std::memcpy(dst + r * out_row + kperm_index(2 * m) / 2 * pair_bytes, src + r * in_row + m * pair_bytes,
                  size_t(pair_bytes));
  return out;
}

// The GEMM path's scratch (splitk partials, stream expert list; guarded: nothing may be
// written past it), or none.
struct Partials {
  size_t bytes;
  Guarded buf;
  Partials(const DeviceWeights& dw, const Problem& p, GemmPath path)
      : bytes(gemm_scratch_bytes(dw, path, p.rows_bound, p.row_space)), buf(bytes) {}
  float* ptr() const { return bytes ? buf.ptr<float>() : nullptr; }
  void expect_guards_intact() const {
    const auto all = buf.all();
    size_t bad = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if ((i < kGuard || i >= all.size() - kGuard) && all[i] != kPoison) ++bad;
    EXPECT_EQ(bad, 0u) << bad << " guard bytes around the partials were written";
  }
};

// with_h_bf16 = false: W4A4 asks for the NVFP4 h only (the bf16 h stays poison).
// h_values (W4A4 only): h as its NVFP4 values in bf16, the only output (Gemm1Out::h).
Gemm1Out run_gemm1(const DeviceWeights& dw, const Problem& p, GemmPath path, bool with_h_bf16 = true,
                   bool h_values = false) {
  const int64_t I = p.s.I, H = p.s.H;
  Partials part(dw, p, path);
  Dev<int32_t> begin(p.begin), count(p.count), gather(p.gather);
  // bf16 A k-permuted where GEMM 1 runs the wgmma kernels (Gemm1Args::a_kperm), as the layer
  // prepares it; NVFP4 A as it is (gemm1 stages it)
  const bool kperm = !p.s.w4a4 && gemm1_reads_kperm(dw, path, p.rows_bound);
  const int64_t a_rows = int64_t(p.a_bf16.size()) / std::max<int64_t>(H, 1);
  Dev<uint16_t> a_bf16(kperm ? kperm_from_logical(p.a_bf16, a_rows, H, 4) : p.a_bf16);
  Dev<uint8_t> a_fp4(p.a_fp4), a_scale(p.a_scale);
  const int64_t Ir = kperm_row(I);  // h is k-permuted (Gemm1Args)
  Guarded h(size_t(p.row_space * Ir * 2));
  Guarded hq(size_t(p.row_space * Ir / 2)), hs(size_t(p.row_space * I / 16));
  Gemm1Args a;
  a.rows = {begin.p, count.p, p.rows_bound, p.row_space};
  if (p.s.w4a4) {
    a.a_fp4 = a_fp4.p;
    a.a_scale = a_scale.p;
    a.a_dq = p.a_dq;
    a.h_fp4 = hq.ptr<uint8_t>();
    a.h_scale = hs.ptr<uint8_t>();
    a.h_gs = 1.0f / 0.05f;
  } else {
    a.a_bf16 = a_bf16.p;
    a.a_kperm = kperm;
  }
  a.a_gather = p.s.batched ? nullptr : gather.p;
  a.a_rows = p.T;
  a.h_bf16 = with_h_bf16 || !p.s.w4a4 ? h.ptr<uint16_t>() : nullptr;
  if (h_values) {
    a.h_bf16 = nullptr;
    a.h_fp4 = nullptr;
    a.h_scale = nullptr;
    a.h_values = h.ptr<uint16_t>();
  }
  a.partials = part.ptr();
  a.partials_bytes = part.bytes;
  gemm1(dw, a, path, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  part.expect_guards_intact();
  return {logical_from_kperm(h.all(), p.row_space, I, 4), logical_from_kperm(hq.all(), p.row_space, I, 1), hs.all()};
}

std::vector<uint8_t> run_gemm2(const DeviceWeights& dw, const Problem& p, GemmPath path,
                               const std::vector<uint16_t>& h_bf16, const std::vector<uint8_t>& h_fp4,
                               const std::vector<uint8_t>& h_scale, float a_dq) {
  Dev<int32_t> begin(p.begin), count(p.count);
  // h as gemm1 writes it: k-permuted rows (Gemm2Args)
  Dev<uint16_t> a_bf16(kperm_from_logical(h_bf16, int64_t(h_bf16.size()) / std::max<int64_t>(p.s.I, 1), p.s.I, 4));
  Dev<uint8_t> a_fp4(kperm_from_logical(h_fp4, int64_t(h_fp4.size()) * 2 / std::max<int64_t>(p.s.I, 1), p.s.I, 1)),
      a_scale(h_scale);
  Guarded y(size_t(p.row_space * p.s.H * 4));
  Partials part(dw, p, path);
  Gemm2Args a;
  a.rows = {begin.p, count.p, p.rows_bound, p.row_space};
  if (!h_fp4.empty()) {
    a.a_fp4 = a_fp4.p;
    a.a_scale = a_scale.p;
    a.a_dq = a_dq;
  } else {
    a.a_bf16 = a_bf16.p;
  }
  a.y = y.ptr<float>();
  a.partials = part.ptr();
  a.partials_bytes = part.bytes;
  gemm2(dw, a, path, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  part.expect_guards_intact();
  return y.all();
}

template <class T>
std::vector<T> payload(const std::vector<uint8_t>& all) {
  std::vector<T> v((all.size() - 2 * kGuard) / sizeof(T));
  std::memcpy(v.data(), all.data() + kGuard, v.size() * sizeof(T));
  return v;
}

const char* path_name(GemmPath p) {
  return p == GemmPath::naive    ? "naive"
         : p == GemmPath::splitk ? "splitk"
         : p == GemmPath::stream ? "stream"
         : p == GemmPath::sm90   ? "sm90"
         : p == GemmPath::decode ? "decode"
                                 : "fast";
}

int device_sms() {
  int n = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  return n;
}

// gemm1 and gemm2 of one problem on one path against the host computation.
void check_problem(const Spec& spec, GemmPath path) {
  SCOPED_TRACE(describe(spec) + " path " + path_name(path));
  const Problem p = make_problem(spec);
  const auto dw = upload_weights(p.w, 0);
  const int64_t H = spec.H, I = spec.I;
  const auto covered = covered_rows(p);
  const auto& d = p.w.desc;
  if (path == GemmPath::splitk && spec.decode) {
    // The decode cases must run the split kernels, not fall back to the fast path.
    const int sms = device_sms();
    const SplitKConfig c1 = choose_splitk_config({p.rows_bound, spec.E, int(2 * I), int(H), sms});
    const SplitKConfig c2 = choose_splitk_config({p.rows_bound, spec.E, int(H), int(I), sms});
    ASSERT_TRUE(c1.split && c2.split) << "gemm1: " << c1.why << "; gemm2: " << c2.why;
  }
  if (path == GemmPath::stream && spec.decode) {
    // The decode cases must run the streaming kernels, not fall back to the fast path.
    const int sms = device_sms();
    const StreamConfig c1 = choose_stream_config({p.rows_bound, spec.E, int(2 * I), sms});
    const StreamConfig c2 = choose_stream_config({p.rows_bound, spec.E, int(H), sms});
    ASSERT_TRUE(c1.token_tiles && c2.token_tiles) << "gemm1: " << c1.why << "; gemm2: " << c2.why;
  }
  // decode (and sm90, which runs the smallest decode shapes on the same kernels): the decode
  // cases must run the decode kernels, one launch per GEMM that splits K; prefill cases never do.
  int64_t decode_expected1 = 0, decode_expected2 = 0;
  if (path == GemmPath::decode || path == GemmPath::sm90) {
    const DecodeConfig c1 = choose_decode_config({p.rows_bound, spec.E, int(2 * I), int(H), device_sms()});
    // GEMM 2 splits from the lower edge where GEMM 1 takes the decode kernels (decode_gemm2)
    const DecodeConfig c2 = choose_decode_config({p.rows_bound, spec.E, int(H), int(I), device_sms()}, 0,
                                                 c1.use ? kDecodeEdgeAfterDecode : kDecodeEdge);
    if (spec.decode) ASSERT_TRUE(c1.use && c2.use) << "gemm1: " << c1.why << "; gemm2: " << c2.why;
    if (spec.large) ASSERT_FALSE(c1.use || c2.use) << "gemm1: " << c1.why << "; gemm2: " << c2.why;
    decode_expected1 = c1.use ? 1 : 0;
    decode_expected2 = c2.use ? 1 : 0;
  }
  const int64_t decode_before = decode_launches();
  // sm90: the prefill cases must choose the wgmma kernels; where the device and build have them
  // (sm_90, sm_90a code) they must really run, one launch per GEMM that takes them. Each GEMM
  // decides on its own waves (choose_sm90_config); W4A4's GEMM 1 takes them only where GEMM 2 does
  // too, since its h is staged through bf16 for GEMM 2 (in the scratch that gemm_scratch_bytes
  // sizes). Elsewhere the fast path runs and they never launch.
  int64_t sm90_expected1 = 0, sm90_expected2 = 0;
  if (path == GemmPath::sm90) {
    const int sms = device_sms();
    const int block = detail::weight_block(spec.wf);
    const Sm90Config c1 = choose_sm90_config(
        {.rows_bound = p.rows_bound, .num_experts = spec.E, .N = int(2 * I), .K = int(H), .num_sms = sms, .block = block});
    const Sm90Config c2 = choose_sm90_config(
        {.rows_bound = p.rows_bound, .num_experts = spec.E, .N = int(H), .K = int(I), .num_sms = sms, .block = block});
    if (spec.large) ASSERT_TRUE(c1.use && c2.use) << "gemm1: " << c1.why << "; gemm2: " << c2.why;
    const bool device_has = why_no_sm90(0).empty();
    sm90_expected1 = c1.use && (c2.use || !spec.w4a4) && device_has ? 1 : 0;
    sm90_expected2 = c2.use && device_has ? 1 : 0;
    if (spec.w4a4 && sm90_expected1) {
      ASSERT_GT(gemm_scratch_bytes(*dw, path, p.rows_bound, p.row_space), 0u) << "W4A4 needs the staging scratch";
    }
  }
  const int64_t sm90_before = sm90_launches();

  // ---- gemm1 ----
  const Gemm1Out o1 = run_gemm1(*dw, p, path);
  EXPECT_EQ(sm90_launches() - sm90_before, sm90_expected1) << "wgmma launches for gemm1";
  EXPECT_EQ(decode_launches() - decode_before, decode_expected1) << "decode launches for gemm1";
  expect_untouched(o1.h, covered, size_t(I * 2), "h_bf16");
  const auto h = payload<uint16_t>(o1.h);
  AOperand A{p.a_bf16.empty() ? nullptr : p.a_bf16.data(), p.a_fp4.empty() ? nullptr : p.a_fp4.data(),
             p.a_scale.empty() ? nullptr : p.a_scale.data(), p.a_dq, H};
  int64_t bad = 0;
  std::string first;
  for (int64_t r = 0; r < p.row_space; ++r) {
    if (!covered[size_t(r)]) continue;
    const int64_t e = [&] {
      for (size_t x = 0; x < p.count.size(); ++x)
        if (r >= p.begin[x] && r < p.begin[x] + p.count[x]) return int64_t(x);
      return int64_t(-1);
    }();
    const int64_t row = p.gather[size_t(r)];
    std::vector<double> a(static_cast<size_t>(H));
    for (int64_t k = 0; k < H; ++k) a[size_t(k)] = A.at(row, k);
    for (int64_t i = 0; i < I; ++i) {
      double g = 0, u = 0, gm = 0, um = 0;
      for (int64_t k = 0; k < H; ++k) {
        const double wg = weight(p.w.w13, p.w.w13_scale, p.w.w13_dq, p.w.block, e, 2 * I, H, i, k);
        const double wu = weight(p.w.w13, p.w.w13_scale, p.w.w13_dq, p.w.block, e, 2 * I, H, I + i, k);
        g += wg * a[size_t(k)];
        u += wu * a[size_t(k)];
        gm += std::fabs(wg * a[size_t(k)]);
        um += std::fabs(wu * a[size_t(k)]);
      }
      if (!p.w.w13_bias.empty()) {
        g += p.w.w13_bias[size_t(e * 2 * I + i)];
        u += p.w.w13_bias[size_t(e * 2 * I + I + i)];
      }
      const double ref = act(d, g, u);
      // fp32 sums in another order: |error| <= 1e-5 * sum |terms|; propagate through act.
      const double eg = 1e-5 * gm + 1e-6 * std::fabs(g) + 1e-30, eu = 1e-5 * um + 1e-6 * std::fabs(u) + 1e-30;
      double spread = 0;
      for (int sg = -1; sg <= 1; sg += 2)
        for (int su = -1; su <= 1; su += 2) spread = std::max(spread, std::fabs(act(d, g + sg * eg, u + su * eu) - ref));
      // + 1e-30: SPEC's fp32 exp overflows past 88.7, so that act's tiny values where the gate
      // is past about -88.7 (silu) or -52 (swiglu_oai), below 1e-30 even times u, are 0 there
      // (the GEMM cases with gates of hundreds); the double oracle keeps them.
      const double tol = bf16_ulp(ref) + 2 * spread + 1e-6 * std::fabs(ref) + 1e-30;
      const double got = double(bf16_to_f32(h[size_t(r * I + i)]));
      if (!(std::fabs(got - ref) <= tol) && bad++ == 0) {
        std::ostringstream o;
        o << "h[row " << r << ", i " << i << "] (expert " << e << ", A row " << row << "): got " << got << ", want "
          << ref << " +- " << tol << " (g " << g << ", u " << u << ")";
        first = o.str();
      }
    }
  }
  EXPECT_EQ(bad, 0) << bad << " mismatches in h; first: " << first;

  // W4A4: the NVFP4 h equals the host quantization of the GPU's own bf16 h, bit for bit.
  std::vector<uint8_t> hq_rows, hs_rows;
  if (spec.w4a4) {
    expect_untouched(o1.fp4, covered, size_t(I / 2), "h_fp4");
    expect_untouched(o1.scale, covered, size_t(I / 16), "h_scale");
    const auto hq = payload<uint8_t>(o1.fp4), hs = payload<uint8_t>(o1.scale);
    int64_t qbad = 0;
    std::string qfirst;
    std::vector<float> x(static_cast<size_t>(I));
    std::vector<uint8_t> q(static_cast<size_t>(I / 2)), s(static_cast<size_t>(I / 16));
    for (int64_t r = 0; r < p.row_space; ++r) {
      if (!covered[size_t(r)]) continue;
      for (int64_t i = 0; i < I; ++i) x[size_t(i)] = bf16_to_f32(h[size_t(r * I + i)]);
      detail::nvfp4_quantize_rows(x.data(), 1, I, 1.0f / 0.05f, q.data(), s.data());
      for (int64_t j = 0; j < I / 2; ++j)
        if (q[size_t(j)] != hq[size_t(r * I / 2 + j)] && qbad++ == 0)
          qfirst = "h_fp4[row " + std::to_string(r) + ", byte " + std::to_string(j) + "]: got " +
                   std::to_string(hq[size_t(r * I / 2 + j)]) + ", want " + std::to_string(q[size_t(j)]);
      for (int64_t j = 0; j < I / 16; ++j)
        if (s[size_t(j)] != hs[size_t(r * I / 16 + j)] && qbad++ == 0)
          qfirst = "h_scale[row " + std::to_string(r) + ", block " + std::to_string(j) + "]: got " +
                   std::to_string(hs[size_t(r * I / 16 + j)]) + ", want " + std::to_string(s[size_t(j)]);
    }
    EXPECT_EQ(qbad, 0) << qbad << " mismatches in the NVFP4 h; first: " << qfirst;
  }

  // ---- gemm2, on a fresh random A (h-shaped, independent of gemm1) ----
  std::mt19937_64 rng(spec.seed * 7 + 3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a2;
  std::vector<uint8_t> a2q, a2s;
  const float a2_dq = 0.21f;
  if (spec.w4a4) {
    a2q.resize(size_t(p.row_space * I / 2));
    for (auto& b : a2q) b = uint8_t(rng());
    a2s.resize(size_t(p.row_space * I / 16));
    for (auto& b : a2s) b = random_e4m3(rng);
  } else {
    a2.resize(size_t(p.row_space * I));
    for (auto& v : a2) v = bf16_from_f32(normal(rng));
  }
  const auto y_all = run_gemm2(*dw, p, path, a2, a2q, a2s, a2_dq);
  EXPECT_EQ(sm90_launches() - sm90_before, sm90_expected1 + sm90_expected2)
      << "wgmma launches for gemm1 and gemm2";
  EXPECT_EQ(decode_launches() - decode_before, decode_expected1 + decode_expected2) << "decode launches for gemm1 and gemm2";
  expect_untouched(y_all, covered, size_t(H * 4), "y");
  const auto y = payload<float>(y_all);
  AOperand A2{a2.empty() ? nullptr : a2.data(), a2q.empty() ? nullptr : a2q.data(),
              a2s.empty() ? nullptr : a2s.data(), a2_dq, I};
  bad = 0;
  for (size_t e = 0; e < p.count.size(); ++e)
    for (int32_t j = 0; j < p.count[e]; ++j) {
      const int64_t r = p.begin[e] + j;
      for (int64_t n = 0; n < H; ++n) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < I; ++i) {
          const double t = weight(p.w.w2, p.w.w2_scale, p.w.w2_dq, p.w.block, int64_t(e), H, I, n, i) * A2.at(r, i);
          ref += t;
          mag += std::fabs(t);
        }
        if (!p.w.w2_bias.empty()) ref += p.w.w2_bias[e * size_t(H) + size_t(n)];
        const double tol = 1e-5 * mag + 1e-6 * std::fabs(ref) + 1e-30;
        const double got = y[size_t(r * H + n)];
        if (!(std::fabs(got - ref) <= tol) && bad++ == 0) {
          std::ostringstream o;
          o << "y[row " << r << ", n " << n << "] (expert " << e << "): got " << got << ", want " << ref << " +- " << tol;
          first = o.str();
        }
      }
    }
  EXPECT_EQ(bad, 0) << bad << " mismatches in y; first: " << first;

  // Determinism: a second run is bitwise identical.
  const Gemm1Out o1b = run_gemm1(*dw, p, path);
  EXPECT_TRUE(o1b.h == o1.h && o1b.fp4 == o1.fp4 && o1b.scale == o1.scale) << "gemm1 differs between two runs";
  EXPECT_TRUE(run_gemm2(*dw, p, path, a2, a2q, a2s, a2_dq) == y_all) << "gemm2 differs between two runs";
}

std::vector<Spec> specs() {
  std::vector<Spec> v;
  // NVFP4 W4A16 silu, permuted rows with a gather; empty experts, counts 1, 7, 67, 300.
  // H = 336 is not a multiple of 64 (K padding); 2I = 160 is not a multiple of 128.
  v.push_back({"nvfp4_silu", 336, 80, 6, WeightFormat::nvfp4, false, Activation::silu, false, {0, 1, 7, 0, 67, 300}, false, 11});
  // The same, batched (gaps between experts, identity gather).
  v.push_back({"nvfp4_batched", 336, 80, 4, WeightFormat::nvfp4, false, Activation::silu, false, {7, 0, 67, 1}, true, 12});
  // W4A4: NVFP4 activations in, NVFP4 h out.
  v.push_back({"nvfp4_w4a4", 256, 96, 5, WeightFormat::nvfp4, true, Activation::silu, false, {1, 0, 67, 7, 30}, false, 13});
  v.push_back({"nvfp4_w4a4_batched", 192, 48, 3, WeightFormat::nvfp4, true, Activation::silu, false, {9, 0, 17}, true, 14});
  // MXFP4 (gpt-oss): biases, swiglu_oai.
  v.push_back({"mxfp4_swiglu_bias", 352, 96, 5, WeightFormat::mxfp4, false, Activation::swiglu_oai, true, {7, 67, 0, 1, 40}, false, 15});
  v.push_back({"mxfp4_batched", 288, 64, 3, WeightFormat::mxfp4, false, Activation::swiglu_oai, true, {0, 13, 3}, true, 16});
  // All rows on one expert; more than one row tile of 128 in both GEMMs.
  v.push_back({"one_expert", 512, 192, 3, WeightFormat::nvfp4, false, Activation::silu, false, {0, 150, 0}, false, 17});
  // Decode shapes (<= 8 rows per expert): the splitk path splits both GEMMs. H = 1040 and
  // I = 528 pad K to 17 and 9 fragment blocks (uneven last split); N = 1056 and 1040 leave a
  // partial 128-row tile (2I/16 = 66 and H/16 = 65 fragment rows, the latter odd).
  v.push_back({"decode_nvfp4", 1040, 528, 8, WeightFormat::nvfp4, false, Activation::silu, false,
               {1, 0, 3, 8, 2, 0, 5, 1}, false, 18, true});
  v.push_back({"decode_nvfp4_w4a4", 1024, 512, 6, WeightFormat::nvfp4, true, Activation::silu, false,
               {2, 1, 0, 8, 1, 3}, false, 19, true});
  v.push_back({"decode_nvfp4_batched", 1040, 528, 5, WeightFormat::nvfp4, false, Activation::silu, false,
               {1, 4, 0, 8, 2}, true, 20, true});
  v.push_back({"decode_mxfp4_swiglu_bias", 1056, 544, 6, WeightFormat::mxfp4, false, Activation::swiglu_oai, true,
               {1, 1, 0, 2, 7, 1}, false, 21, true});
  v.push_back({"decode_w4a4_batched", 1024, 528, 4, WeightFormat::nvfp4, true, Activation::silu, false,
               {3, 0, 1, 6}, true, 22, true});
  // An expert with more rows than a decode token tile (12 = 8 + 4: two slots of one expert).
  v.push_back({"decode_nvfp4_two_tiles", 1040, 528, 6, WeightFormat::nvfp4, false, Activation::silu, false,
               {1, 12, 0, 2, 1, 0}, false, 28, true});
  // Prefill shapes (>= 64 rows per active expert): the sm90 path runs its wgmma kernels (too
  // few tiles here for the default split; CudaGemmSm90Forced runs it, _split_3ctas).
  // 128-token tiles (72 rows per active expert), counts no multiple of the tile (140 = 128 + 12).
  // H = 784, I = 272: K = 784 and 272 pad to 13 and 5 fragment blocks; N = 544 (34 fragment
  // rows: 2 full 256-row tiles and a partial one) and N = 784 (49, odd: the last warp's second
  // m-tile is past N).
  v.push_back({"large_nvfp4", 784, 272, 3, WeightFormat::nvfp4, false, Activation::silu, false, {0, 140, 70}, false,
               23, false, true});
  // 64-token tiles (148 rows per expert: 3 tiles of 64 pad less than 2 of 128), MXFP4 with
  // swiglu_oai and biases, batched rows (gaps between experts); one partial row tile per GEMM.
  v.push_back({"large_mxfp4_swiglu_bias_batched", 352, 96, 2, WeightFormat::mxfp4, false, Activation::swiglu_oai,
               true, {150, 141}, true, 24, false, true});
  // 128-token tiles, H / 16 = 21 fragment rows in GEMM 2 (odd), K = 80 in GEMM 2 (its second
  // 64-k block holds 16); an expert of 130 rows leaves a last tile of 2.
  v.push_back({"large_nvfp4_odd", 336, 80, 2, WeightFormat::nvfp4, false, Activation::silu, false, {130, 77}, false,
               25, false, true});
  // The wgmma kernels' other two (tile, format) pairs. 64-token tiles with NVFP4 (150 rows per
  // expert): K = 464 and 144 leave 16 k in the last 64-k block, N = 288 and 464 (18 and 29
  // fragment rows) a partial 256-row tile, the latter with an odd last warp.
  v.push_back({"large_nvfp4_tile64", 464, 144, 3, WeightFormat::nvfp4, false, Activation::silu, false,
               {150, 160, 140}, false, 28, false, true});
  // 128-token tiles with MXFP4 (230 rows per expert): K = 352 and 160 leave 32 k in the last
  // block; N = 320 and 352 (20 and 22 fragment rows).
  v.push_back({"large_mxfp4_tile128", 352, 160, 2, WeightFormat::mxfp4, false, Activation::swiglu_oai, true,
               {200, 260}, false, 29, false, true});
  // W4A4 at prefill size: the sm90 path stages A, h through bf16 (A rows through the gather).
  v.push_back({"large_w4a4", 256, 96, 2, WeightFormat::nvfp4, true, Activation::silu, false, {100, 70}, false, 26,
               false, true});
  // The same batched (identity gather: only the experts' rows are staged, gaps untouched); 2I =
  // 224 is one partial 256-row tile; I / 16 = 7 NVFP4 blocks of h per row (odd).
  v.push_back({"large_w4a4_batched", 192, 112, 3, WeightFormat::nvfp4, true, Activation::silu, false, {80, 0, 45},
               true, 27, false, true});
  // Fewer than 64 rows per active expert (from 16 NVFP4, 22 MXFP4): rsws4 runs width split
  // (Sm90Config::narrow_width; Narrow/CudaGemmSm90Widths.WidthSplitAtEveryWidth forces each width). Counts
  // on both sides of each narrow width and of 64 (65 = a full tile and a narrow one of 1);
  // H = 320 and I = 144: a partial last k-block in both GEMMs, 2I = 288 a partial row tile.
  v.push_back({"narrow_nvfp4", 320, 144, 8, WeightFormat::nvfp4, false, Activation::silu, false,
               {20, 35, 48, 60, 56, 64, 65, 3}, false, 30, false, true});
  // MXFP4 with swiglu_oai and biases, batched rows.
  v.push_back({"narrow_mxfp4_swiglu_bias_batched", 352, 96, 6, WeightFormat::mxfp4, false, Activation::swiglu_oai,
               true, {33, 40, 47, 63, 70, 32}, true, 31, false, true});
  // W4A4 (staged through bf16), A rows through the gather.
  v.push_back({"narrow_w4a4", 256, 128, 5, WeightFormat::nvfp4, true, Activation::silu, false, {17, 30, 45, 66, 9},
               false, 32, false, true});
  // Last tiles of 65..127 rows, which the split's wide width (Sm90Config::wide_width) runs at
  // n80 / n96 / n112 (CudaGemmSm90.WideWidthAtEveryWidth forces each width; too few units here
  // for the default to split): counts on both sides of each wide width and of 64 and 128 (198
  // = 128 + 70, 20 a narrow last tile, 0 an expert without rows).
  v.push_back({"split_partial_nvfp4", 320, 144, 12, WeightFormat::nvfp4, false, Activation::silu, false,
               {65, 80, 81, 96, 97, 112, 113, 127, 198, 64, 20, 0}, false, 33, false, true});
  // MXFP4 with swiglu_oai and biases, batched rows.
  v.push_back({"split_partial_mxfp4_swiglu_bias_batched", 352, 96, 6, WeightFormat::mxfp4, false,
               Activation::swiglu_oai, true, {66, 88, 105, 120, 230, 40}, true, 34, false, true});
  // W4A4 (staged through bf16), A rows through the gather.
  v.push_back({"split_partial_w4a4", 256, 128, 5, WeightFormat::nvfp4, true, Activation::silu, false,
               {70, 100, 110, 200, 33}, false, 35, false, true});
  // GEMM 2 of one k-block (I = 48: K pads to one 64-k block whose last 16 k are zeros). The
  // rsws kernels' stages hold two k-blocks, but a unit of odd KB has one in its first stage:
  // here the unit's only one. Narrow and 64-token tiles (rsws4), then 128-token (rsws).
  v.push_back({"narrow_nvfp4_one_kblock", 320, 48, 5, WeightFormat::nvfp4, false, Activation::silu, false,
               {20, 40, 64, 65, 3}, false, 43, false, true});
  v.push_back({"large_nvfp4_one_kblock", 336, 48, 2, WeightFormat::nvfp4, false, Activation::silu, false, {140, 130},
               false, 44, false, true});
  // Each format with the other's activation: the sm90 kernels compile the activation of the
  // format's presets into GEMM 1's epilogue and run any other at run time; these take that route
  // at the main widths (and every forced kernel), the narrow widths and the wide widths.
  v.push_back({"large_nvfp4_swiglu_bias", 784, 272, 3, WeightFormat::nvfp4, false, Activation::swiglu_oai, true,
               {0, 140, 70}, false, 36, false, true});
  v.push_back({"large_mxfp4_silu", 352, 96, 2, WeightFormat::mxfp4, false, Activation::silu, false, {150, 141},
               true, 37, false, true});
  v.push_back({"narrow_nvfp4_swiglu_bias_batched", 320, 144, 6, WeightFormat::nvfp4, false, Activation::swiglu_oai,
               true, {20, 35, 48, 60, 65, 3}, true, 38, false, true});
  v.push_back({"narrow_mxfp4_silu", 352, 96, 6, WeightFormat::mxfp4, false, Activation::silu, false,
               {33, 40, 47, 63, 70, 17}, false, 39, false, true});
  v.push_back({"split_partial_nvfp4_swiglu_bias", 320, 144, 6, WeightFormat::nvfp4, false, Activation::swiglu_oai,
               true, {65, 81, 97, 113, 198, 20}, false, 40, false, true});
  v.push_back({"split_partial_mxfp4_silu_batched", 352, 96, 6, WeightFormat::mxfp4, false, Activation::silu, false,
               {66, 88, 105, 120, 230, 40}, true, 41, false, true});
  // Gates of hundreds (weights x 2^13 / 2^12): most of silu's |g| and many of swiglu_oai's
  // g < -87 / alpha are past the epilogues' straight-line activation route
  // (gemm1_activation_mid), so its columns take the branch to gemm1_activation.
  v.push_back({"nvfp4_silu_big_gates", 336, 80, 6, WeightFormat::nvfp4, false, Activation::silu, false,
               {0, 1, 7, 0, 67, 300}, false, 17, false, true, 13});
  v.push_back({"mxfp4_swiglu_big_gates", 352, 96, 5, WeightFormat::mxfp4, false, Activation::swiglu_oai, true,
               {7, 67, 0, 1, 40}, false, 18, false, false, 12});
  return v;
}

class CudaGemm : public ::testing::TestWithParam<std::tuple<int, GemmPath>> {};

TEST_P(CudaGemm, MatchesHost) {
  SKIP_WITHOUT_GPU();
  const auto [i, path] = GetParam();
  check_problem(specs()[size_t(i)], path);
}

INSTANTIATE_TEST_SUITE_P(CudaGemmCases, CudaGemm,
                         ::testing::Combine(::testing::Range(0, int(specs().size())),
                                            ::testing::Values(GemmPath::naive, GemmPath::fast, GemmPath::splitk,
                                                              GemmPath::stream, GemmPath::sm90, GemmPath::decode)),
                         [](const auto& info) {
                           return specs()[size_t(std::get<0>(info.param))].name + "_" +
                                  path_name(std::get<1>(info.param));
                         });

using fp4moe::testing::ChoiceScope;

// Each mma.sync token tile forced (set_sm80_token_tile) on the fast path, with counts on both
// sides of every n8 column and tile edge (columns without rows skip their MMAs; 25 and 33 and
// 50 rows take a second and third tile at the small tiles). The first three have a partial
// last k-block in both GEMMs; the "whole_k" three have K a whole number of k-blocks, long enough
// (GEMM 1 16, GEMM 2 12) that every tile's groups before the last load without a test per stage.
using Sm80TileScope = ChoiceScope<int, sm80_token_tile, set_sm80_token_tile>;

std::vector<Spec> tile_specs() {
  const std::vector<int32_t> counts{1, 8, 9, 16, 17, 24, 25, 32, 33, 0, 50};
  return {{"tiles_nvfp4", 336, 80, 11, WeightFormat::nvfp4, false, Activation::silu, false, counts, false, 41},
          {"tiles_w4a4_batched", 192, 96, 11, WeightFormat::nvfp4, true, Activation::silu, false, counts, true, 42},
          {"tiles_mxfp4_swiglu_bias", 352, 96, 11, WeightFormat::mxfp4, false, Activation::swiglu_oai, true, counts,
           false, 43},
          {"tiles_whole_k_nvfp4", 1024, 768, 11, WeightFormat::nvfp4, false, Activation::silu, false, counts, false, 44},
          {"tiles_whole_k_w4a4_batched", 1024, 768, 11, WeightFormat::nvfp4, true, Activation::silu, false, counts,
           true, 45},
          {"tiles_whole_k_mxfp4_swiglu_bias", 1024, 768, 11, WeightFormat::mxfp4, false, Activation::swiglu_oai, true,
           counts, false, 46}};
}

class CudaGemmSm80Tile : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaGemmSm80Tile, MatchesHost) {
  SKIP_WITHOUT_GPU();
  const auto [i, tile] = GetParam();
  const Sm80TileScope scope(tile);
  check_problem(tile_specs()[size_t(i)], GemmPath::fast);
}

INSTANTIATE_TEST_SUITE_P(CudaGemmSm80Tiles, CudaGemmSm80Tile,
                         ::testing::Combine(::testing::Range(0, 6), ::testing::Values(8, 16, 24, 32)),
                         [](const auto& info) {
                           return tile_specs()[size_t(std::get<0>(info.param))].name + "_tile" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The decode kernels at every slice count (set_decode_splits, 2 to kDecodeMaxSplits warps per
// CTA) against the host. For s slices each GEMM's K is m s k-blocks (m slices' worth each, at
// least 8 k-blocks in all, so that the rule splits), its last k-block partial: GEMM 1's K = H
// of m s - 1/4 (MXFP4: - 1/2) and GEMM 2's K = I of (m + 1) s - 1/2 k-blocks.
using DecodeSplitsScope = ChoiceScope<int, decode_splits, set_decode_splits>;

std::vector<Spec> split_specs(int s) {
  const int64_t m = (8 + s - 1) / s, I = 64 * (m + 1) * s - 32;
  return {{"splits_nvfp4", 64 * m * s - 16, I, 4, WeightFormat::nvfp4, false, Activation::silu, false, {1, 8, 0, 3},
           false, uint64_t(50 + s), true},
          {"splits_mxfp4_swiglu_bias_batched", 64 * m * s - 32, I, 3, WeightFormat::mxfp4, false,
           Activation::swiglu_oai, true, {2, 0, 7}, true, uint64_t(70 + s), true},
          {"splits_w4a4", 64 * m * s - 16, I, 3, WeightFormat::nvfp4, true, Activation::silu, false, {5, 1, 8}, false,
           uint64_t(90 + s), true}};
}

class CudaGemmDecodeSplits : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaGemmDecodeSplits, MatchesHost) {
  SKIP_WITHOUT_GPU();
  const auto [i, s] = GetParam();
  const Spec spec = split_specs(s)[size_t(i)];
  const DecodeSplitsScope scope(s);
  int64_t rows_bound = 5;  // as check_problem's problem: the counts' sum + 5
  for (int32_t c : spec.counts) rows_bound += c;
  for (const auto [N, K] : {std::pair{2 * spec.I, spec.H}, std::pair{spec.H, spec.I}}) {
    const DecodeConfig c = choose_decode_config({rows_bound, spec.E, int(N), int(K), device_sms()}, decode_splits());
    ASSERT_TRUE(c.use && c.splits == s) << "N " << N << " K " << K << ": " << c.why;
  }
  check_problem(spec, GemmPath::decode);
}

INSTANTIATE_TEST_SUITE_P(CudaGemmDecodeSplitCounts, CudaGemmDecodeSplits,
                         ::testing::Combine(::testing::Range(0, 3), ::testing::Range(2, kDecodeMaxSplits + 1)),
                         [](const auto& info) {
                           return split_specs(std::get<1>(info.param))[size_t(std::get<0>(info.param))].name + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Runs the wgmma path on a kernel (set_sm90_kernel) for its lifetime, then restores the choice.
using Sm90KernelScope = ChoiceScope<Sm90Kernel, sm90_kernel, set_sm90_kernel>;

// Each wgmma kernel forced (set_sm90_kernel: rs, ws, rsws, rsws4) on the prefill cases, against
// the host computation as the *_sm90 cases check the default choice (rsws4 at 64-token tiles,
// rsws at 128); where the device and build have wgmma code the forced kernel must really run
// (rsws4 at 64-token tiles, rsws at 128). For the persistent kernels (ws,
// rsws) grid limit 0: one CTA per SM (the test shapes give each CTA at most one unit); 3
// (*_3ctas): each CTA walks many (slot, row tile) units,
// across experts, row tiles and partial tiles (the row tables' two sets, the barriers' phases
// carried from unit to unit).
enum class Forced { rs, ws, ws_3ctas, rsws, rsws_3ctas, rsws4, rsws4_3ctas, split_3ctas };

Sm90Kernel forced_kernel(Forced f) {
  switch (f) {
    case Forced::rs: return Sm90Kernel::rs;
    case Forced::ws:
    case Forced::ws_3ctas: return Sm90Kernel::ws;
    case Forced::rsws:
    case Forced::rsws_3ctas: return Sm90Kernel::rsws;
    case Forced::rsws4:
    case Forced::rsws4_3ctas: return Sm90Kernel::rsws4;
    case Forced::split_3ctas: return Sm90Kernel::split;
  }
  return Sm90Kernel::automatic;
}

const char* forced_suffix(Forced f) {
  static const char* const names[] = {"_rs",    "_ws",         "_ws_3ctas",    "_rsws",
                                      "_rsws_3ctas", "_rsws4", "_rsws4_3ctas", "_split_3ctas"};
  return names[int(f)];
}

class CudaGemmSm90Forced : public ::testing::TestWithParam<std::tuple<int, Forced>> {};

TEST_P(CudaGemmSm90Forced, MatchesHost) {
  SKIP_WITHOUT_GPU();
  const auto [i, forced] = GetParam();
  const Spec spec = specs()[size_t(i)];  // a copy: specs() returns by value
  if (!spec.large) GTEST_SKIP() << "not a prefill case: the wgmma kernels do not run";
  const Sm90KernelScope scope(forced_kernel(forced));
  set_sm90_ws_grid_limit(forced == Forced::ws_3ctas || forced == Forced::rsws_3ctas ||
                                 forced == Forced::rsws4_3ctas || forced == Forced::split_3ctas
                             ? 3
                             : 0);
  const int64_t before = sm90_launches(), ws_before = sm90_ws_launches(), rsws_before = sm90_rsws_launches(),
                rsws4_before = sm90_rsws4_launches();
  check_problem(spec, GemmPath::sm90);
  set_sm90_ws_grid_limit(0);
  // gemm1 and gemm2 (one token tile: it depends on the rows per expert; _split_3ctas: a launch
  // of each of rsws and rsws4), each run twice (check_problem's determinism check).
  const int64_t launches = why_no_sm90(0).empty() ? 4 : 0;
  const Sm90Config c = choose_sm90_config(
      {.rows_bound = make_problem(spec).rows_bound, .num_experts = spec.E, .N = int(2 * spec.I), .K = int(spec.H),
       .block = detail::weight_block(spec.wf)});
  if (forced == Forced::split_3ctas) {
    EXPECT_EQ(sm90_kernel_for(c), Sm90Kernel::split);
    EXPECT_EQ(sm90_launches() - before, launches) << "wgmma GEMMs";
    EXPECT_EQ(sm90_rsws_launches() - rsws_before, launches) << "the wide tiles' launches";
    EXPECT_EQ(sm90_rsws4_launches() - rsws4_before, launches) << "the narrow tiles' launches";
    EXPECT_EQ(sm90_ws_launches() - ws_before, 0);
    return;
  }
  const Sm90Kernel runs = sm90_kernel_for(c);
  EXPECT_EQ(runs, forced_kernel(forced) == Sm90Kernel::rsws4 && runs != Sm90Kernel::rsws4 ? Sm90Kernel::rsws
                                                                                          : forced_kernel(forced));
  EXPECT_EQ(sm90_launches() - before, launches) << "wgmma launches for gemm1 and gemm2";
  EXPECT_EQ(sm90_ws_launches() - ws_before, runs == Sm90Kernel::ws ? launches : 0)
      << "of them the SS warp-specialized kernel";
  EXPECT_EQ(sm90_rsws_launches() - rsws_before, runs == Sm90Kernel::rsws ? launches : 0)
      << "of them the RS warp-specialized kernel";
  EXPECT_EQ(sm90_rsws4_launches() - rsws4_before, runs == Sm90Kernel::rsws4 ? launches : 0)
      << "of them its wide variant";
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGemmSm90Forced,
                         ::testing::Combine(::testing::Range(0, int(specs().size())),
                                            ::testing::Values(Forced::rs, Forced::ws, Forced::ws_3ctas, Forced::rsws,
                                                              Forced::rsws_3ctas, Forced::rsws4, Forced::rsws4_3ctas,
                                                              Forced::split_3ctas)),
                         [](const auto& info) {
                           return specs()[size_t(std::get<0>(info.param))].name +
                                  forced_suffix(std::get<1>(info.param));
                         });

// The default choice: the RS warp-specialized kernels, the wide one at 64-token tiles; a forced
// kernel everywhere (rsws4 at 64-token tiles only).
TEST(CudaGemmSm90Choice, RsWsByDefault) {
  Sm90Config c64, c128;
  c64.use = c128.use = true;
  c64.token_tile = 64;
  c128.token_tile = 128;
  {
    const Sm90KernelScope scope(Sm90Kernel::automatic);
    EXPECT_EQ(sm90_kernel_for(c64), Sm90Kernel::rsws4);
    EXPECT_EQ(sm90_kernel_for(c128), Sm90Kernel::rsws);
    // kimi-k2 (E = 384, N = 2I = 4096): T = 8192 gives 171 rows per expert (unsplit: three
    // 64-token tiles, odd: 64), T = 16384 341 (six: 128); by default both split, as does
    // T = 2048 (43; unsplit 64-token tiles): 128 full tiles x 16 row tiles are 15 waves.
    EXPECT_EQ(choose_sm90_config({8192 * 8, 384, 4096, 7168}).token_tile, 64);
    EXPECT_EQ(choose_sm90_config({16384 * 8, 384, 4096, 7168}).token_tile, 128);
    EXPECT_EQ(choose_sm90_config({2048 * 8, 384, 4096, 7168}).token_tile, 64);
    for (const int T : {2048, 8192, 16384}) {
      const Sm90Config c = choose_sm90_config({T * 8, 384, 4096, 7168});
      EXPECT_TRUE(c.split) << T;
      EXPECT_EQ(sm90_kernel_for(c), Sm90Kernel::split) << T;
    }
    // qwen3-235b (E = 128, 2I = 3072: 12 row tiles) T = 512: 32 full tiles x 12 are 2.9 waves,
    // and 32 rows per expert leave no wide width to split for: unsplit. qwen3-30b (2I = 1536: 6
    // row tiles) T = 1024 is 2.9 waves too, but splits for its wide width (64 rows per expert);
    // T = 2048 5.8 waves, split.
    EXPECT_FALSE(choose_sm90_config({512 * 8, 128, 3072, 4096}).split);
    EXPECT_EQ(sm90_kernel_for(choose_sm90_config({512 * 8, 128, 3072, 4096})), Sm90Kernel::rsws4);
    EXPECT_TRUE(choose_sm90_config({1024 * 8, 128, 1536, 2048}).split);
    EXPECT_TRUE(choose_sm90_config({2048 * 8, 128, 1536, 2048}).split);
    // fewer SMs, fewer tiles needed
    EXPECT_TRUE(choose_sm90_config({512 * 8, 128, 3072, 4096, 66}).split);
  }
  c64.split = c128.split = true;  // a forced kernel runs what it names, whatever the config says
  for (Sm90Kernel k : {Sm90Kernel::rs, Sm90Kernel::ws, Sm90Kernel::rsws, Sm90Kernel::split}) {
    const Sm90KernelScope scope(k);
    EXPECT_EQ(sm90_kernel_for(c64), k);
    EXPECT_EQ(sm90_kernel_for(c128), k);
  }
  // rsws4 has 64-token tiles only.
  const Sm90KernelScope scope(Sm90Kernel::rsws4);
  EXPECT_EQ(sm90_kernel_for(c64), Sm90Kernel::rsws4);
  EXPECT_EQ(sm90_kernel_for(c128), Sm90Kernel::rsws);
}

// No rows at all (rows_bound 0): nothing is launched, nothing written.
TEST(CudaGemmEdge, NoRows) {
  SKIP_WITHOUT_GPU();
  Spec s{"empty", 64, 32, 2, WeightFormat::nvfp4, false, Activation::silu, false, {0, 0}, false, 3};
  Problem p = make_problem(s);
  p.rows_bound = 0;
  const auto dw = upload_weights(p.w, 0);
  for (GemmPath path : {GemmPath::naive, GemmPath::fast, GemmPath::splitk, GemmPath::stream, GemmPath::sm90,
                        GemmPath::decode}) {
    const auto out = run_gemm1(*dw, p, path);
    for (uint8_t b : out.h) ASSERT_EQ(b, kPoison) << path_name(path);
  }
}

// Bad arguments are rejected with the argument named, before any launch.
TEST(CudaGemmEdge, RejectsBadArguments) {
  SKIP_WITHOUT_GPU();
  Spec s{"bad", 64, 32, 2, WeightFormat::nvfp4, false, Activation::silu, false, {1, 1}, false, 4};
  const Problem p = make_problem(s);
  const auto dw = upload_weights(p.w, 0);
  Dev<int32_t> begin(p.begin), count(p.count);
  Dev<uint16_t> a(p.a_bf16);
  Gemm1Args g;
  g.rows = {begin.p, count.p, 2, p.row_space};
  g.h_bf16 = reinterpret_cast<uint16_t*>(a.p);
  auto expect_error = [&](const Gemm1Args& args, const char* needle) {
    try {
      gemm1(*dw, args, GemmPath::fast, nullptr);
      ADD_FAILURE() << "no error; wanted one naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(g, "a_bf16/a_fp4");  // neither A given
  Gemm1Args g2 = g;
  g2.a_bf16 = a.p + 1;  // misaligned for the 16-byte copies
  expect_error(g2, "a_bf16");
  Gemm1Args g3 = g;
  g3.a_bf16 = a.p;
  g3.rows.count = nullptr;
  expect_error(g3, "rows.begin/rows.count");
  Gemm1Args g5 = g;  // k-permuted A where GEMM 1 runs the mma.sync kernels
  g5.a_bf16 = a.p;
  g5.a_kperm = true;
  expect_error(g5, "a_kperm");
  Gemm1Args g4 = g;
  g4.a_bf16 = a.p;
  g4.h_bf16 = nullptr;
  g4.h_values = reinterpret_cast<uint16_t*>(a.p);
  expect_error(g4, "h_values");  // a W4A16 layer: NVFP4 h as values is refused
}

// upload_weights checks sizes before touching the device.
TEST(CudaGemmEdge, UploadRejectsWrongSizes) {
  SKIP_WITHOUT_GPU();
  Spec s{"sizes", 64, 32, 2, WeightFormat::nvfp4, false, Activation::silu, false, {1, 1}, false, 5};
  Problem p = make_problem(s);
  p.w.w2_scale.pop_back();
  try {
    upload_weights(p.w, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w2_scale"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------
// Config (no GPU needed)
// ---------------------------------------------------------------------------
// The token tiles of `tile` rows that a random split of `rows` rows over `experts` experts
// needs (about a third of the experts get none, expert 0 takes what is left).
int64_t tiles_of_a_random_split(std::mt19937_64& rng, int64_t experts, int64_t rows, int64_t tile,
                                TileSpan span = TileSpan::all, SpanCut cut = SpanCut{}) {
  std::vector<int64_t> cnt(size_t(experts), 0);
  int64_t left = rows;
  for (auto& x : cnt) {
    if (rng() % 3 == 0) continue;
    x = int64_t(rng() % uint64_t(left + 1));
    left -= x;
  }
  cnt[0] += left;
  int64_t need = 0;
  for (auto x : cnt) need += span_tiles(int(x), int(tile), span, cut);
  return need;
}

TEST(CudaGemmConfig, CoversEveryTileOfAnyRouting) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 2000; ++trial) {
    Gemm80Problem pb;
    pb.num_experts = 1 + int64_t(rng() % 384);
    pb.rows_bound = int64_t(rng() % (trial % 2 ? 20 : 140000));
    pb.N = 16 * (1 + int(rng() % 900));
    pb.K = 64 * (1 + int(rng() % 100));
    const Gemm80Config c = choose_config(pb);
    ASSERT_TRUE(c.token_tile == 8 || c.token_tile == 16 || c.token_tile == 24 || c.token_tile == 32) << c.token_tile;
    ASSERT_GE(c.grid_x * c.row_tile, pb.N);
    ASSERT_LT((c.grid_x - 1) * c.row_tile, pb.N);
    ASSERT_LE(c.grid_y, 65535);
    ASSERT_FALSE(c.why.empty());
    if (pb.rows_bound == 0) continue;
    ASSERT_GE(c.grid_y, 1);
    // A random split of rows_bound over the experts never needs more tiles than c.tiles.
    ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, c.token_tile), c.tiles)
        << "rows_bound " << pb.rows_bound << " E " << pb.num_experts;
  }
}

TEST(CudaGemmConfig, DecodeUsesTheSmallestTokenTile) {
  Gemm80Problem pb{8, 384, 4096, 7168};
  EXPECT_EQ(choose_config(pb).token_tile, 8);
  EXPECT_EQ(choose_config(pb).tiles, 8);  // each tile holds at least one row
}

// The token tile holds nearly every expert's rows under uniform routing, and no smaller tile
// would: checked on routings drawn here (each token's top-k of E experts, distinct), not on
// the rule's Poisson model.
TEST(CudaGemmConfig, TokenTileHoldsNearlyEveryExpert) {
  struct Case {
    int64_t E, k, T;
    int tile;
  };
  // kimi-k2 T = 128 / 256 / 512, deepseek-v3 T = 128, qwen3 T = 88 / 104 / 128 / 192 / 224
  // (5.5 / 6.5 / 8 / 12 / 14 rows per expert: the measured sides of the 8 -> 16 and 16 -> 24
  // steps), gpt-oss (top-4 of 128) T = 512 / 640.
  const Case cases[] = {{384, 8, 128, 8},  {384, 8, 256, 8},  {384, 8, 512, 16}, {256, 8, 128, 8},
                        {128, 8, 88, 8},   {128, 8, 104, 16}, {128, 8, 128, 16}, {128, 8, 192, 16},
                        {128, 8, 224, 24}, {128, 4, 512, 24}, {128, 4, 640, 32}};
  std::mt19937_64 rng(7);
  for (const Case& c : cases) {
    SCOPED_TRACE("E " + std::to_string(c.E) + " k " + std::to_string(c.k) + " T " + std::to_string(c.T));
    const Gemm80Config cfg = choose_config({c.T * c.k, c.E, 4096, 7168});
    EXPECT_EQ(cfg.token_tile, c.tile) << cfg.why;
    int64_t experts = 0, over = 0, over_smaller = 0;
    for (int rep = 0; rep < 40; ++rep) {
      std::vector<int> count(size_t(c.E), 0);
      std::vector<int64_t> ids(size_t(c.E));
      for (int64_t t = 0; t < c.T; ++t) {
        std::iota(ids.begin(), ids.end(), int64_t(0));
        for (int64_t j = 0; j < c.k; ++j) {  // partial Fisher-Yates: k distinct experts
          std::swap(ids[size_t(j)], ids[size_t(j + int64_t(rng() % uint64_t(c.E - j)))]);
          ++count[size_t(ids[size_t(j)])];
        }
      }
      for (int n : count) {
        experts += n > 0;
        over += n > cfg.token_tile;
        over_smaller += n > cfg.token_tile - 8;
      }
    }
    // The tile's spill limit with room for the draw (these routings spread a little more
    // evenly than Poisson); the smaller tile must spill more than its own limit allows.
    if (cfg.token_tile < 32)
      EXPECT_LE(double(over) / double(experts), sm80_tile_max_spill(cfg.token_tile) + 0.02)
          << "experts needing a second tile";
    if (cfg.token_tile > 8)
      EXPECT_GE(double(over_smaller) / double(experts), sm80_tile_max_spill(cfg.token_tile - 8) - 0.04)
          << "the smaller tile would do";
  }
  // forced_tile replaces the rule; other values leave it.
  EXPECT_EQ(choose_config({128 * 8, 384, 4096, 7168}, 24).token_tile, 24);
  EXPECT_EQ(choose_config({128 * 8, 384, 4096, 7168}, 12).token_tile, 8);
}

// splitk: too small a partials buffer is an error naming it (before any launch).
TEST(CudaGemmEdge, SplitKRejectsShortPartials) {
  SKIP_WITHOUT_GPU();
  const Spec s = specs()[7];  // decode_nvfp4
  ASSERT_TRUE(s.decode);
  const Problem p = make_problem(s);
  const auto dw = upload_weights(p.w, 0);
  const size_t need = splitk_partials_bytes(*dw, p.rows_bound, p.row_space);
  ASSERT_GT(need, 0u);
  Dev<int32_t> begin(p.begin), count(p.count), gather(p.gather);
  Dev<uint16_t> a(p.a_bf16);
  Guarded h(size_t(p.row_space * s.I * 2)), part(need);
  Gemm1Args g;
  g.rows = {begin.p, count.p, p.rows_bound, p.row_space};
  g.a_bf16 = a.p;
  g.a_gather = gather.p;
  g.h_bf16 = h.ptr<uint16_t>();
  g.partials = part.ptr<float>();
  g.partials_bytes = need - 4;
  try {
    gemm1(*dw, g, GemmPath::splitk, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("partials_bytes"), std::string::npos) << e.what();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (uint8_t b : h.all()) ASSERT_EQ(b, kPoison);
}

// splitk config: every (expert, row tile, split) has a CTA, the splits cut K in whole
// fragment blocks with none empty, and the partials hold splits x row_space x N floats.
TEST(CudaGemmConfig, SplitKCoversEveryTileAndSlice) {
  std::mt19937_64 rng(7);
  int split_seen = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    SplitKProblem pb;
    pb.num_experts = 1 + int64_t(rng() % 384);
    pb.rows_bound = int64_t(rng() % (trial % 2 ? 20 : 3000));
    pb.N = 16 * (1 + int(rng() % 900));
    pb.K = 64 * (1 + int(rng() % 120));
    pb.num_sms = 1 + int(rng() % 200);
    const SplitKConfig c = choose_splitk_config(pb);
    ASSERT_FALSE(c.why.empty());
    ASSERT_GE(c.grid_x * kSplitKRowTile, pb.N);
    ASSERT_LT((c.grid_x - 1) * kSplitKRowTile, pb.N);
    ASSERT_LE(c.grid_y, 65535);
    ASSERT_EQ(c.kb_total, (pb.K + 63) / 64);
    if (!c.split) {
      ASSERT_EQ(splitk_gemm_partials_bytes(c, 100, pb.N), 0u);
      continue;
    }
    ++split_seen;
    ASSERT_GT(pb.rows_bound, 0);
    ASSERT_GE(c.grid_y, 1);
    ASSERT_GE(c.splits, 2);
    ASSERT_LE(c.splits, kSplitKMaxSplits);
    ASSERT_GE(c.kb_per_split, 1);
    ASSERT_GE(int64_t(c.splits) * c.kb_per_split, c.kb_total) << "a K slice has no CTA";
    ASSERT_LT(int64_t(c.splits - 1) * c.kb_per_split, c.kb_total) << "the last split is empty";
    ASSERT_EQ(c.ctas, c.grid_x * c.tiles * c.splits);
    ASSERT_EQ(splitk_gemm_partials_bytes(c, 100, pb.N), size_t(c.splits) * 100 * size_t(pb.N) * 4);
    // Only decode shapes split: at most 8 rows per active expert on average.
    const int64_t active = std::max<int64_t>(1, std::min(pb.num_experts, pb.rows_bound));
    ASSERT_LE((pb.rows_bound + active - 1) / active, kSplitKTokenTile);
    // A random split of rows_bound over the experts never needs more token tiles than c.tiles.
    ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, kSplitKTokenTile), c.tiles);
  }
  EXPECT_GT(split_seen, 100);
}

// The decode shapes of issue 4 on an H200 (132 SMs): both GEMMs split, every SM gets at
// least two CTAs and >= 32 KiB of weights in flight (4.3 TB/s x ~1 us / 132 SMs).
TEST(CudaGemmConfig, SplitKDecodeKeepsEnoughBytesInFlight) {
  struct Model {
    const char* name;
    int H, I, E, k;
  };
  for (const Model m : {Model{"kimi-k2", 7168, 2048, 384, 8}, Model{"deepseek-v3", 7168, 2048, 256, 8},
                        Model{"qwen3-235b", 4096, 1536, 128, 8}, Model{"qwen3-30b", 2048, 768, 128, 8},
                        Model{"gpt-oss-120b", 2880, 2880, 128, 4}}) {
    for (int T : {1, 2}) {
      const int64_t rows = int64_t(T) * m.k;
      for (const auto& [N, K] : {std::pair{2 * m.I, m.H}, std::pair{m.H, m.I}}) {
        const SplitKConfig c = choose_splitk_config({rows, m.E, N, K, 132});
        SCOPED_TRACE(std::string(m.name) + " T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" +
                     std::to_string(K) + ": " + c.why);
        EXPECT_TRUE(c.split);
        EXPECT_GE(c.ctas, 2 * 132);
        EXPECT_GE(c.in_flight_per_sm, 32 * 1024);
      }
    }
  }
  // Prefill-sized batches keep the fast path (its token tiles reuse each weight tile).
  EXPECT_FALSE(choose_splitk_config({512 * 8, 384, 4096, 7168, 132}).split);
  EXPECT_FALSE(choose_splitk_config({32 * 8, 384, 4096, 7168, 132}).split);  // 8192 CTAs already
}

// stream config: decode shapes (<= 16 rows per active expert) stream, with enough units for
// every active expert's rows; the grid never exceeds what stays resident.
// The decode path's config: taken exactly at <= 8 rows per active expert where the row units
// leave the SMs short of warps and K holds two slices of kDecodeMinKbPerSplit; the row pairs
// cover N, the K slices cover the k-blocks with none empty, no other slice count takes as few
// whole waves of resident CTAs with slices as short (one of them fewer or shorter), and a forced
// count is taken exactly where it leaves no slice empty; the slot bound covers every tile of any
// split of the rows.
TEST(CudaGemmConfig, DecodeCoversDecodeShapes) {
  std::mt19937_64 rng(13);
  int seen = 0, declined_unsplit = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    DecodeProblem pb;
    pb.num_experts = 1 + int64_t(rng() % 384);
    pb.rows_bound = int64_t(rng() % (trial % 2 ? 40 : 6000));
    pb.N = 16 * (1 + int(rng() % 900));
    pb.K = 16 * (1 + int(rng() % 600));
    pb.num_sms = 1 + int(rng() % 200);
    // the edges the layer uses, and 0 (FP4MOE_DECODE_EDGE=0: never declined for lack of units)
    const int edge = trial % 4 == 0 ? kDecodeEdgeAfterDecode : trial % 4 == 1 ? 0 : kDecodeEdge;
    const DecodeConfig c = choose_decode_config(pb, 0, edge);
    ASSERT_FALSE(c.why.empty());
    const int64_t active = std::max<int64_t>(1, std::min(pb.num_experts, pb.rows_bound));
    const int64_t per_expert = (pb.rows_bound + active - 1) / active;
    if (pb.rows_bound == 0 || per_expert > kDecodeTokenTile) {
      ASSERT_FALSE(c.use);
      continue;
    }
    const int kb_total = (pb.K + 63) / 64;
    ASSERT_TRUE(c.splits * c.kb_per_split >= kb_total && (c.splits - 1) * c.kb_per_split < kb_total)
        << "K " << pb.K << ": " << c.splits << " slices of " << c.kb_per_split;
    if (!c.use) {
      ASSERT_EQ(c.splits, 1) << c.why;
      // declined only where the SMs have enough row units or K is too short to split
      ASSERT_TRUE(int64_t(pb.num_sms) * kDecodeWarpsPerSm / (c.grid_x * std::min<int64_t>(c.tiles, active)) < edge ||
                  kb_total < 2 * kDecodeMinKbPerSplit)
          << c.why << " (edge " << edge << ")";
      ++declined_unsplit;
      continue;
    }
    ++seen;
    ASSERT_GE(c.splits, 2);
    ASSERT_LE(c.splits, kDecodeMaxSplits);
    const int64_t units = c.grid_x * std::min<int64_t>(c.tiles, active);
    ASSERT_TRUE(int64_t(pb.num_sms) * kDecodeWarpsPerSm / units >= edge && kb_total >= 2 * kDecodeMinKbPerSplit)
        << c.why << " (edge " << edge << ")";
    auto waves = [&](int s) {
      const int64_t resident = int64_t(pb.num_sms) * (kDecodeResidentWarps / s);
      return (units + resident - 1) / resident;
    };
    // no other slice count is better on both counts: as few waves or fewer, slices as short or
    // shorter, one of them strictly
    for (int s = 2; s <= std::min(kDecodeMaxSplits, kb_total); ++s) {
      const int kbs = (kb_total + s - 1) / s;
      ASSERT_FALSE(waves(s) <= waves(c.splits) && kbs <= c.kb_per_split &&
                   (waves(s) < waves(c.splits) || kbs < c.kb_per_split))
          << c.why << "; " << s << " slices of " << kbs << " k-blocks in " << waves(s) << " waves";
    }
    const int forced = 2 + int(rng() % (kDecodeMaxSplits - 1));
    const DecodeConfig f = choose_decode_config(pb, forced, edge);
    ASSERT_TRUE(f.use);
    ASSERT_TRUE(f.splits * f.kb_per_split >= kb_total && (f.splits - 1) * f.kb_per_split < kb_total);
    const int s_forced = std::min(forced, kb_total), kbs = (kb_total + s_forced - 1) / s_forced;
    ASSERT_EQ(f.splits, (kb_total + kbs - 1) / kbs) << "forced " << forced << ", " << kb_total << " k-blocks";
    if (kb_total % s_forced == 0) ASSERT_EQ(f.splits, s_forced);
    ASSERT_EQ(c.grid_x, (pb.N / 16 + 1) / 2);
    ASSERT_EQ(c.grid_y, std::min<int64_t>(c.tiles, 65535));
    ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, kDecodeTokenTile), c.tiles)
        << "rows_bound " << pb.rows_bound << " E " << pb.num_experts;
  }
  EXPECT_GT(seen, 100);
  EXPECT_GT(declined_unsplit, 100);
  // kimi-k2 on an H200: T = 1 splits both GEMMs (128 and 224 row pairs x 8 experts); T = 8
  // (59 experts touched) fills the SMs unsplit; T = 2048 (43 rows per expert) is declined.
  // GEMM 1's 1,024 units run in one wave of 3 slices (24 resident warps per SM), GEMM 2's 1,792
  // need two at any count and take 3 slices of 11 k-blocks. qwen3-235b T = 1: 768 and 1,024 units
  // in one wave of 4 and 3 slices; qwen3-30b's GEMM 2 (512 units, 12 k-blocks): 6 slices.
  auto splits = [](DecodeProblem pb) { return choose_decode_config(pb).splits; };
  EXPECT_EQ(splits({8, 384, 4096, 7168, 132}), 3);
  EXPECT_EQ(splits({8, 384, 7168, 2048, 132}), 3);
  EXPECT_EQ(splits({8, 128, 3072, 4096, 132}), 4);
  EXPECT_EQ(splits({8, 128, 4096, 1536, 132}), 3);
  EXPECT_EQ(splits({8, 128, 2048, 768, 132}), 6);
  EXPECT_FALSE(choose_decode_config({64, 384, 4096, 7168, 132}).use);
  EXPECT_FALSE(choose_decode_config({16384, 384, 4096, 7168, 132}).use);
  // qwen3-30b T = 8: GEMM 1 (3,072 units, 2 wanted warps each) splits at either edge; GEMM 2
  // (4,096 units, 1) only at the edge after a decode GEMM 1, in 2 slices of 6 k-blocks.
  EXPECT_TRUE(choose_decode_config({64, 128, 1536, 2048, 132}).use);
  EXPECT_FALSE(choose_decode_config({64, 128, 2048, 768, 132}).use);
  const DecodeConfig after = choose_decode_config({64, 128, 2048, 768, 132}, 0, kDecodeEdgeAfterDecode);
  EXPECT_TRUE(after.use);
  EXPECT_EQ(after.splits, 2);
}

TEST(CudaGemmConfig, StreamCoversDecodeShapes) {
  std::mt19937_64 rng(11);
  int seen = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    StreamProblem pb;
    pb.num_experts = 1 + int64_t(rng() % 384);
    pb.rows_bound = int64_t(rng() % (trial % 2 ? 40 : 6000));
    pb.N = 16 * (1 + int(rng() % 900));
    pb.num_sms = 1 + int(rng() % 200);
    pb.pairs_needed = rng() % 2;
    const StreamConfig c = choose_stream_config(pb);
    ASSERT_FALSE(c.why.empty());
    const int64_t active = std::max<int64_t>(1, std::min(pb.num_experts, pb.rows_bound));
    const int64_t per_expert = (pb.rows_bound + active - 1) / active;
    if (pb.rows_bound == 0 || per_expert > 16) {
      ASSERT_EQ(c.token_tiles, 0);
      continue;
    }
    ++seen;
    ASSERT_EQ(c.token_tiles, per_expert <= 8 ? 1 : 2);
    ASSERT_TRUE(c.unit_tiles == 2 || (c.unit_tiles == 1 && !pb.pairs_needed));
    const int rows = 16 * c.unit_tiles;
    ASSERT_EQ(c.units_per_expert * rows >= pb.N && (c.units_per_expert - 1) * rows < pb.N, true);
    ASSERT_GE(c.grid, 1);
    ASSERT_LE(c.grid, int64_t(pb.num_sms) * kStreamCtasPerSm);
  }
  EXPECT_GT(seen, 100);
  EXPECT_EQ(stream_scratch_bytes(384), 385u * 4);
  // kimi-k2 at T = 1 and 512 streams; at T = 2048 (43 rows per expert) it does not.
  EXPECT_EQ(choose_stream_config({8, 384, 4096, 132}).token_tiles, 1);
  // T = 1: 16-row units (8 experts x 128 pair units would fill half the warp slots), unless
  // the epilogue needs row pairs
  EXPECT_EQ(choose_stream_config({8, 384, 4096, 132}).unit_tiles, 1);
  EXPECT_EQ(choose_stream_config({8, 384, 4096, 132, true}).unit_tiles, 2);
  EXPECT_EQ(choose_stream_config({512 * 8, 384, 4096, 132}).token_tiles, 2);
  EXPECT_EQ(choose_stream_config({2048 * 8, 384, 4096, 132}).token_tiles, 0);
}

// Prepared NVFP4 scale codes: for every finite non-zero e4m3 code, the kernels' bf16 S
// (code' * 16 + (236 << 7)) times 2^-126 is |scale| * 2^-8 exactly, and the MX code
// c' << 7 is 2^(c' - 127); all folded values are normal bf16 (no precision lost).
TEST(CudaGemmLayout, PreparedScaleCodesAreExact) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    if ((code & 0x7F) == 0x7F || (code & 0x7F) == 0) continue;  // NaN (rejected) and zero (codes zeroed)
    const uint8_t p = nvfp4_prepared_code(code);
    EXPECT_EQ(folded_scale(p, 16), std::fabs(e4m3_to_f32(code)) * std::ldexp(1.0f, -8)) << "e4m3 code " << c;
    const uint32_t bits = folded_scale_bf16_bits(p, 16);
    EXPECT_GE(bits >> 7, 1u) << "subnormal bf16 S for code " << c;
    EXPECT_LT(bits >> 7, 255u) << "S overflows bf16 for code " << c;
    EXPECT_EQ(bits & 0xFu, 0u);
  }
  for (int c = 128; c <= 253; ++c)  // MX codes' are in [128, 253] by construction
    EXPECT_EQ(folded_scale(uint8_t(c), 32), std::ldexp(1.0f, c - 253)) << "MX code " << c;
}

// sm90 config: prefill shapes (>= 64 rows per active expert) choose the wgmma kernels, with
// enough (expert, token tile) slots for any routing; other shapes keep the fast path.
TEST(CudaGemmConfig, Sm90CoversPrefillShapes) {
  std::mt19937_64 rng(13);
  int used = 0, tile64 = 0, split = 0, width_split = 0, folded = 0, wide_width = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    Sm90Problem pb;
    pb.num_experts = 1 + int64_t(rng() % 384);
    pb.rows_bound = int64_t(rng() % (trial % 2 ? 300 : 140000));
    pb.N = 16 * (1 + int(rng() % 900));
    pb.K = 16 * (1 + int(rng() % 500));
    pb.num_sms = trial % 3 == 0 ? 78 : 132;
    pb.block = trial % 5 == 0 ? kMxfp4Block : kNvfp4Block;
    const Sm90Config c = choose_sm90_config(pb);
    ASSERT_FALSE(c.why.empty());
    ASSERT_GE(c.grid_x * kSm90RowTile, pb.N);
    ASSERT_LT((c.grid_x - 1) * kSm90RowTile, pb.N);
    const int64_t active = std::max<int64_t>(1, std::min(pb.num_experts, pb.rows_bound));
    const int64_t per_expert = (pb.rows_bound + active - 1) / active;
    // NVFP4 takes the wgmma kernels from fewer rows where the GEMM has more waves of units
    // (ceil(N / 256) row tiles of each active expert over the SMs).
    const double units = double((pb.N + 255) / 256 * active) / pb.num_sms;
    const int min_rows = pb.block == kMxfp4Block            ? kSm90MinRowsPerExpertMx
                         : units >= kSm90MinRowsManyWaves   ? kSm90MinRowsPerExpert
                         : units >= kSm90WidthSplitMinWaves ? kSm90MinRowsFewWaves
                                                            : kSm90MinRowsFewestWaves;
    if (pb.rows_bound == 0 || per_expert < min_rows) {
      ASSERT_FALSE(c.use) << c.why;
      continue;
    }
    ASSERT_TRUE(c.use) << c.why;
    ++used;
    ASSERT_TRUE(c.token_tile == 64 || c.token_tile == 128) << c.token_tile;
    tile64 += c.token_tile == 64;
    ASSERT_GE(c.grid_y, 1);
    ASSERT_LE(c.grid_y, 65535);
    ASSERT_LE(c.grid_y, c.tiles);
    // A random split of rows_bound over the experts never needs more tiles than c.tiles.
    ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, c.token_tile), c.tiles)
        << "rows_bound " << pb.rows_bound << " E " << pb.num_experts;
    // The split from kSm90SplitMinWaves waves of full 128-token tiles, or from
    // kSm90SplitWideMinWaves with its wide width; bounds on both spans (a forced split runs them
    // too).
    const int64_t wide_units = pb.rows_bound / 128 * c.grid_x;
    if (wide_units >= kSm90SplitMinWaves * pb.num_sms) ASSERT_TRUE(c.split) << c.why;
    if (c.split && wide_units < kSm90SplitMinWaves * pb.num_sms) {
      ASSERT_GE(wide_units, kSm90SplitWideMinWaves * pb.num_sms) << c.why;
      ASSERT_LT(c.wide_width, 16) << c.why;
    }
    split += c.split;
    ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, kSplitWideTile, TileSpan::wide),
              c.wide_tiles);
    ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, kSplitNarrowTile, TileSpan::narrow),
              c.narrow_tiles);
    ASSERT_GE(c.wide_tiles, 1);
    ASSERT_GE(c.narrow_tiles, 1);
    // The width split: only at 64-token tiles (rsws4) with fewer than 64 rows per expert; its
    // wide launch is bounded by c.tiles, its narrow one by c.narrow_tiles (one per expert).
    if (c.split ? per_expert % 128 > 64 : c.token_tile != 64 || per_expert >= 64) ASSERT_EQ(c.narrow_width, 8) << c.why;
    // Below kSm90SplitWidthMinWaves: none with the split; below kSm90WidthSplitMinWaves
    // unsplit, only where the waves times the most a width w can save of a 64-wide tile
    // (1 - w / 8) reach kSm90WidthSplitMinGain.
    const double waves = double(c.grid_x * std::min(pb.num_experts, pb.rows_bound)) / pb.num_sms;
    if (waves < kSm90SplitWidthMinWaves && c.split) ASSERT_EQ(c.narrow_width, 8) << c.why;
    if (waves < kSm90WidthSplitMinWaves && !c.split && c.narrow_width < 8)
      ASSERT_GE(waves * (1.0 - c.narrow_width / 8.0), kSm90WidthSplitMinGain) << c.why;
    ASSERT_TRUE(c.narrow_width == 8 || (c.narrow_width >= kMinNarrowWidth && c.narrow_width <= kMaxNarrowWidth))
        << c.narrow_width;
    width_split += c.narrow_width < 8;
    // The fold: only on rsws4's width split, where the experts expected past 8 * narrow_width
    // rows (normal, sd = sqrt(rows)) times the waves are at most kSm90FoldMaxExtraWaves; then
    // enough tiles for 64 rows.
    if (c.narrow_fold > 1) {
      ASSERT_TRUE(!c.split && c.narrow_width < 8) << c.why;
      ASSERT_GE(8 * c.narrow_width * c.narrow_fold, 64) << c.why;
      ASSERT_LT(8 * c.narrow_width * (c.narrow_fold - 1), 64) << c.why;
    }
    if (!c.split && c.narrow_width < 8) {
      const double past = 0.5 * std::erfc((8.0 * c.narrow_width + 0.5 - double(per_expert)) /
                                          (std::sqrt(std::max(double(per_expert), 1.0)) * std::sqrt(2.0)));
      if (std::abs(past * waves - kSm90FoldMaxExtraWaves) > 1e-9)  // (not at the rounding of a tie)
        ASSERT_EQ(c.narrow_fold > 1, past * waves <= kSm90FoldMaxExtraWaves) << c.why << " past " << past;
    }
    folded += c.narrow_fold > 1;
    // The wide width: only with the split and enough waves; one of kWideWidths.
    if (!c.split || waves < kSm90SplitWidthMinWaves) ASSERT_EQ(c.wide_width, 16) << c.why;
    ASSERT_TRUE(c.wide_width == 16 || std::find(std::begin(kWideWidths), std::end(kWideWidths), c.wide_width) !=
                                          std::end(kWideWidths))
        << c.wide_width;
    wide_width += c.wide_width < 16;
    for (const int v : kWideWidths) {  // any (tests force them): the wide launch and the wide-width one
      ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, kSplitWideTile, TileSpan::wide,
                                        SpanCut{128, 8 * v, 0}),
                c.wide_tiles);
      ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, kSplitWideTile, TileSpan::narrow,
                                        SpanCut{128, 8 * v, 64}),
                c.narrow_tiles);
    }
    for (int w = kMinNarrowWidth; w <= kMaxNarrowWidth; ++w) {  // any (tests force them)
      if (c.token_tile == 64) {
        const SpanCut cut{64, 8 * w, 0};
        ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, 64, TileSpan::wide, cut), c.tiles);
        ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, 64, TileSpan::narrow, cut),
                  c.narrow_tiles);
        for (int f = 2; 8 * w * (f - 1) < 64; ++f) {  // any fold (tests force them)
          const SpanCut folded{64, 8 * w, 0, f};
          ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, 64, TileSpan::wide, folded), c.tiles);
          ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, 64, TileSpan::narrow, folded),
                    c.folded_tiles);
        }
      }
      for (const SpanCut cut : {SpanCut{128, 8 * w, 0}, SpanCut{128, 64, 8 * w}})
        ASSERT_LE(tiles_of_a_random_split(rng, pb.num_experts, pb.rows_bound, 64, TileSpan::narrow, cut),
                  c.narrow_tiles);
    }
  }
  EXPECT_GT(used, 100);
  EXPECT_GT(tile64, 10);
  EXPECT_GT(split, 10);
  EXPECT_GT(width_split, 10);
  EXPECT_GT(folded, 3);
  EXPECT_GT(wide_width, 10);
  {
    // The width split's widths and folds where the wgmma kernels run from 16 rows per expert at any
    // waves (the environment's threshold): qwen3-30b and qwen3-235b take them from 19 and 18.
    const fp4moe::testing::EnvVar from16("FP4MOE_SM90_MIN_ROWS", "16");
    // The width split's widths (Sm90Config::narrow_width): kimi-k2 (E = 384, k = 8) T = 768 /
    // 1024 / 2048 / 8192 (16 / 22 / 43 / 171 = 128 + 43 rows per expert, split): last tiles of
    // <= 24 / 32 / 48 / 48 rows; qwen3-235b (E = 128, k = 8) T = 512 (32, unsplit): 40;
    // deepseek-v3 (E = 256, k = 8) T = 2048 (64 rows): none, nor kimi-k2 T = 4096 (86 rows: its
    // last tiles are wide). Below kSm90WidthSplitMinWaves (qwen3-30b, E = 128, k = 8: GEMM 1 5.8
    // waves of units, GEMM 2 7.8; with E = 64, 2.9 and 3.9): T = 256 / 512 (16 / 32 rows) 3 / 5,
    // none at T = 768 (48 rows: it saves too little); with E = 64, T = 128 (16 rows) 3, none at
    // T = 256 (32 rows). The split's from kSm90SplitWidthMinWaves: qwen3-30b T = 2048 (128 rows,
    // sd 11: last tiles of <= 16 rows).
    const struct {
      Sm90Problem pb;
      int width;
    } widths[] = {{{768 * 8, 384, 4096, 7168}, 3}, {{1024 * 8, 384, 4096, 7168}, 4},  {{2048 * 8, 384, 4096, 7168}, 6},
                  {{2048 * 8, 384, 7168, 2048}, 6}, {{512 * 8, 128, 3072, 4096}, 5},   {{2048 * 8, 256, 4096, 7168}, 8},
                  {{4096 * 8, 384, 4096, 7168}, 8}, {{8192 * 8, 384, 4096, 7168}, 6}, {{256 * 8, 128, 1536, 2048}, 3},
                  {{512 * 8, 128, 1536, 2048}, 5}, {{512 * 8, 128, 2048, 768}, 5},   {{768 * 8, 128, 1536, 2048}, 8},
                  {{768 * 8, 128, 2048, 768}, 8},  {{128 * 8, 64, 1536, 2048}, 3},   {{128 * 8, 64, 2048, 768}, 3},
                  {{256 * 8, 64, 1536, 2048}, 8},  {{256 * 8, 64, 2048, 768}, 8},   {{2048 * 8, 128, 1536, 2048}, 2},
                  {{2048 * 8, 128, 2048, 768}, 2}};
    for (const auto& [pb, width] : widths)
      EXPECT_EQ(choose_sm90_config(pb).narrow_width, width)
          << pb.rows_bound << " rows, E " << pb.num_experts << ", N " << pb.N;
    // rsws4's fold (Sm90Config::narrow_fold): qwen3-30b T = 256 (16 rows, 1.7% of the experts
    // past 24: times 5.8 / 7.8 waves, 0.10 / 0.13) folds both GEMMs, 3 tiles of 24 rows (as many
    // as 64 rows need); qwen3-235b T = 256 (11.6 / 15.5 waves: 0.195 / 0.26) GEMM 1 only; none at
    // qwen3-30b T = 320 (20 rows, 16% past 24), deepseek-v3 T = 512 (31 / 54 waves) or kimi-k2
    // T = 768, nor at qwen3-30b T = 512 (32 rows at n40: 6.6% past, 0.39 / 0.52).
    const struct {
      Sm90Problem pb;
      int fold;
    } folds[] = {{{256 * 8, 128, 1536, 2048}, 3}, {{256 * 8, 128, 2048, 768}, 3},   {{256 * 8, 128, 3072, 4096}, 3},
                 {{256 * 8, 128, 4096, 1536}, 1}, {{320 * 8, 128, 1536, 2048}, 1},   {{512 * 8, 256, 4096, 7168}, 1},
                 {{768 * 8, 384, 4096, 7168}, 1}, {{512 * 8, 128, 1536, 2048}, 1},   {{512 * 8, 128, 2048, 768}, 1}};
    for (const auto& [pb, fold] : folds) {
      const Sm90Config c = choose_sm90_config(pb);
      EXPECT_EQ(c.narrow_fold, fold) << pb.rows_bound << " rows, E " << pb.num_experts << ", N " << pb.N << ": "
                                     << c.why;
      if (fold > 1) EXPECT_NE(c.why.find("folded: up to 72 rows as 3 such tiles"), std::string::npos) << c.why;
    }
  }
  const auto mx = [](int64_t rows, int64_t E, int N, int K) {
    return Sm90Problem{.rows_bound = rows, .num_experts = E, .N = N, .K = K, .block = kMxfp4Block};
  };
  // The split's wide widths (Sm90Config::wide_width): kimi-k2 T = 4096 / 16384 (86 / 342 = 256
  // + 86 rows per expert): last tiles of 65..96 rows at n96; deepseek-v3 T = 2048 (64 rows:
  // half its experts have 65-80) and gpt-oss-120b T = 2048 (MXFP4, E = 128, k = 4: 64): n80;
  // none at kimi-k2 T = 2048 / 8192 (43 / 171 = 128 + 43: hardly a last tile over 64 rows),
  // qwen3-235b T = 2048 (128: their last tiles have ~120 rows or few), or unsplit (qwen3-235b
  // T = 512: 32 rows, 2.9 waves of 128-token tiles, so no wide width to split for). qwen3-30b
  // T = 1024 (64 rows, 2.9 / 3.9 waves: under kSm90SplitMinWaves) splits for its n80.
  const struct {
    Sm90Problem pb;
    int width;
  } wides[] = {{{4096 * 8, 384, 4096, 7168}, 12},          {{4096 * 8, 384, 7168, 2048}, 12},
               {{16384 * 8, 384, 4096, 7168}, 12},         {{2048 * 8, 256, 4096, 7168}, 10},
               {{2048 * 8, 256, 7168, 2048}, 10},          {mx(2048 * 4, 128, 5760, 2880), 10},
               {{8192 * 8, 384, 4096, 7168}, 16},          {{2048 * 8, 128, 3072, 4096}, 16},
               {{2048 * 8, 384, 4096, 7168}, 16},          {{512 * 8, 128, 3072, 4096}, 16},
               {{1024 * 8, 128, 1536, 2048}, 10},          {{1024 * 8, 128, 2048, 768}, 10}};
  for (const auto& [pb, width] : wides)
    EXPECT_EQ(choose_sm90_config(pb).wide_width, width)
        << pb.rows_bound << " rows, E " << pb.num_experts << ", N " << pb.N;
  EXPECT_TRUE(choose_sm90_config({2048 * 8, 384, 4096, 7168}).split);
  EXPECT_TRUE(choose_sm90_config({1024 * 8, 128, 1536, 2048}).split);
  EXPECT_FALSE(choose_sm90_config({512 * 8, 128, 3072, 4096}).split);
  // kimi-k2 (E = 384, k = 8): T = 4096 (86 rows per expert) runs wgmma; the threshold is
  // kSm90MinRowsPerExpert rows per active expert, exactly (MXFP4: kSm90MinRowsPerExpertMx).
  EXPECT_TRUE(choose_sm90_config({4096 * 8, 384, 4096, 7168}).use);
  EXPECT_EQ(choose_sm90_config({4096 * 8, 384, 4096, 7168}).token_tile, 128);
  EXPECT_TRUE(choose_sm90_config({kSm90MinRowsPerExpert * 384, 384, 4096, 7168}).use);
  EXPECT_FALSE(choose_sm90_config({(kSm90MinRowsPerExpert - 1) * 384, 384, 4096, 7168}).use);
  EXPECT_TRUE(choose_sm90_config(mx(kSm90MinRowsPerExpertMx * 128, 128, 5760, 2880)).use);
  EXPECT_FALSE(choose_sm90_config(mx((kSm90MinRowsPerExpertMx - 1) * 128, 128, 5760, 2880)).use);
  // The environment's thresholds replace them, each for its own format.
  {
    const fp4moe::testing::EnvVar rows("FP4MOE_SM90_MIN_ROWS", "25"), rows_mx("FP4MOE_SM90_MIN_ROWS_MX", "48");
    EXPECT_FALSE(choose_sm90_config({24 * 384, 384, 4096, 7168}).use);
    EXPECT_TRUE(choose_sm90_config({25 * 384, 384, 4096, 7168}).use);
    EXPECT_FALSE(choose_sm90_config(mx(47 * 128, 128, 5760, 2880)).use);
    EXPECT_TRUE(choose_sm90_config(mx(48 * 128, 128, 5760, 2880)).use);
  }
  EXPECT_TRUE(choose_sm90_config({kSm90MinRowsPerExpert * 384, 384, 4096, 7168}).use);
  // NVFP4 by the GEMM's waves (gemm_internal.hpp, as measured): deepseek-v3 (31 / 54 waves) T =
  // 512 (16 rows) on wgmma; qwen3-235b (11.6 / 15.5) from T = 288 (18 rows), qwen3-30b (5.8 /
  // 7.8) from T = 304 (19): at T = 256 both run the fast path, with the reason.
  for (const auto& [rows_bound, E, N, K, use] :
       std::vector<std::tuple<int64_t, int64_t, int, int, bool>>{{512 * 8, 256, 4096, 7168, true},
                                                                 {512 * 8, 256, 7168, 2048, true},
                                                                 {272 * 8, 128, 3072, 4096, false},
                                                                 {272 * 8, 128, 4096, 1536, false},
                                                                 {288 * 8, 128, 3072, 4096, true},
                                                                 {288 * 8, 128, 4096, 1536, true},
                                                                 {288 * 8, 128, 1536, 2048, false},
                                                                 {288 * 8, 128, 2048, 768, false},
                                                                 {304 * 8, 128, 1536, 2048, true},
                                                                 {304 * 8, 128, 2048, 768, true}})
    EXPECT_EQ(choose_sm90_config({rows_bound, E, N, K}).use, use) << rows_bound << " rows, E " << E << ", N " << N;
  {
    const Sm90Config c = choose_sm90_config({256 * 8, 128, 1536, 2048});
    EXPECT_FALSE(c.use);
    EXPECT_NE(c.why.find("fewer than 19 rows per active expert at 5.8 waves"), std::string::npos) << c.why;
  }
  // Fewer SMs, more waves: qwen3-30b's GEMM 1 at T = 288 on 66 SMs (11.6 waves) from 18 rows.
  EXPECT_TRUE(choose_sm90_config({.rows_bound = 288 * 8, .num_experts = 128, .N = 1536, .K = 2048, .num_sms = 66}).use);
  // as measured (gemm_internal.hpp): kimi-k2 T = 768 (16 rows per expert) on wgmma, T = 512 (11)
  // on the fast path; gpt-oss-120b (MXFP4, E = 128, k = 4) T = 704 (22) on wgmma, T = 512 / 640
  // (16 / 20) on the fast path.
  EXPECT_TRUE(choose_sm90_config({768 * 8, 384, 4096, 7168}).use);
  EXPECT_FALSE(choose_sm90_config({512 * 8, 384, 4096, 7168}).use);
  EXPECT_TRUE(choose_sm90_config(mx(704 * 4, 128, 5760, 2880)).use);
  EXPECT_FALSE(choose_sm90_config(mx(640 * 4, 128, 5760, 2880)).use);
  EXPECT_FALSE(choose_sm90_config(mx(512 * 4, 128, 5760, 2880)).use);
  EXPECT_TRUE(choose_sm90_config({512 * 4, 128, 5760, 2880}).use);
  EXPECT_FALSE(choose_sm90_config({0, 384, 4096, 7168}).use);
  // 64-token tiles where an odd number of them covers the average expert (up to 256 rows).
  EXPECT_EQ(choose_sm90_config({64 * 384, 384, 7168, 2048}).token_tile, 64);
  EXPECT_EQ(choose_sm90_config({150 * 384, 384, 7168, 2048}).token_tile, 64);
  EXPECT_EQ(choose_sm90_config({200 * 384, 384, 7168, 2048}).token_tile, 128);
  EXPECT_EQ(choose_sm90_config({300 * 384, 384, 7168, 2048}).token_tile, 128);
  // Grid: 256 weight rows per CTA.
  EXPECT_EQ(choose_sm90_config({4096 * 8, 384, 4096, 7168}).grid_x, 16);
  EXPECT_EQ(choose_sm90_config({4096 * 8, 384, 7168, 2048}).grid_x, 28);
}

// The spans (gemm_internal.hpp TileSpan) of each set of launches that runs one GEMM: the split
// (128-row wide tiles, a last part of 1..64 rows as one 64-token tile), the split with a width
// split at every narrow width w (the last part's 1..8w rows at width 8w, 8w+1..64 at 64),
// rsws4's width split (64-row tiles, a last part of 1..8w rows at width 8w; folded f tiles,
// of 1..8wf rows as f tiles of 8w rows at most), and the split at each wide width v (a last
// part of 65..8v rows at width 8v), with and without a width split. For every row count the
// launches' tiles cover exactly the expert's rows, each row once, no row past its launch's
// wgmma width; a wide tile has more rows than its cut's limit, a narrow launch at most its
// fold's tiles per expert; the MMA pads fewer than 64 rows. Unfolded, span_row's short form
// (folds = false) gives the same rows.
TEST(CudaGemmConfig, SpansCoverEveryRowOnce) {
  struct Launch {
    TileSpan span;
    SpanCut cut;
    int tok, width;  // the launch's token tile and wgmma width (rows)
  };
  std::vector<std::vector<Launch>> sets;
  const SpanCut split{};
  EXPECT_EQ(split.tile, kSplitWideTile);
  EXPECT_EQ(split.limit, kSplitNarrowTile);
  EXPECT_EQ(split.floor, 0);
  sets.push_back({{TileSpan::wide, split, 128, 128}, {TileSpan::narrow, split, 64, 64}});
  for (int w = kMinNarrowWidth; w <= kMaxNarrowWidth; ++w) {
    sets.push_back({{TileSpan::wide, split, 128, 128},
                    {TileSpan::narrow, SpanCut{128, 8 * w, 0}, 64, 8 * w},
                    {TileSpan::narrow, SpanCut{128, 64, 8 * w}, 64, 64}});
    sets.push_back(
        {{TileSpan::wide, SpanCut{64, 8 * w, 0}, 64, 64}, {TileSpan::narrow, SpanCut{64, 8 * w, 0}, 64, 8 * w}});
    // rsws4's width split folded f tiles: last parts of up to 8wf rows in the narrow launch.
    for (int f = 2; 8 * w * (f - 1) < 64; ++f)
      sets.push_back({{TileSpan::wide, SpanCut{64, 8 * w, 0, f}, 64, 64},
                      {TileSpan::narrow, SpanCut{64, 8 * w, 0, f}, 64, 8 * w}});
  }
  // The split with a wide width v (the last part's 65..8v rows as a 128-token tile at width 8v),
  // with no width split and with each narrow width.
  for (const int v : kWideWidths) {
    const Launch wide{TileSpan::wide, SpanCut{128, 8 * v, 0}, 128, 128};
    const Launch wide_v{TileSpan::narrow, SpanCut{128, 8 * v, 64}, 128, 8 * v};
    sets.push_back({wide, wide_v, {TileSpan::narrow, split, 64, 64}});
    for (int w = kMinNarrowWidth; w <= kMaxNarrowWidth; ++w)
      sets.push_back({wide, wide_v, {TileSpan::narrow, SpanCut{128, 8 * w, 0}, 64, 8 * w},
                      {TileSpan::narrow, SpanCut{128, 64, 8 * w}, 64, 64}});
  }
  for (size_t si = 0; si < sets.size(); ++si) {
    SCOPED_TRACE("launch set " + std::to_string(si));
    for (int count = 0; count <= 1000; ++count) {
      std::vector<int> seen(size_t(count), 0);
      int mma_rows = 0;
      for (const Launch& l : sets[si]) {
        const int tiles = span_tiles(count, l.tok, l.span, l.cut), first = span_first_row(count, l.span, l.cut);
        mma_rows += tiles * l.width;
        if (l.span == TileSpan::narrow) ASSERT_LE(tiles, l.cut.fold) << count;
        if (l.span == TileSpan::wide) ASSERT_EQ(first, 0);
        for (int t = 0; t < tiles; ++t) {
          int rows = 0;
          for (int j = 0; j < l.tok; ++j) {
            const int r = span_row(count, t, l.tok, j, l.span, l.cut);  // fill_row_tables' row in the expert
            if (l.cut.fold == 1)  // the kernels that never fold take the shorter form: the same rows
              ASSERT_EQ(span_row(count, t, l.tok, j, l.span, l.cut, false), r) << count;
            if (r < 0) continue;
            ASSERT_GE(r, first);
            ASSERT_LT(r, count);
            ASSERT_LT(j, l.width) << "a row past the wgmma's width, count " << count;
            ++seen[size_t(r)];
            ++rows;
          }
          ASSERT_GT(rows, l.span == TileSpan::wide ? l.cut.limit : l.cut.floor) << "count " << count << " tile " << t;
        }
      }
      for (int r = 0; r < count; ++r) ASSERT_EQ(seen[size_t(r)], 1) << "count " << count << " row " << r;
      ASSERT_LT(mma_rows - count, 64) << "padded rows at count " << count;
    }
  }
  for (int count = 0; count <= 1000; ++count)
    for (const int tile : {64, 128}) {
      ASSERT_EQ(span_tiles(count, tile, TileSpan::all), (count + tile - 1) / tile);
      ASSERT_EQ(span_first_row(count, TileSpan::all), 0);
    }
  // kimi-k2 T = 8192 averages 171 rows per expert: one wide tile and one narrow (43 rows).
  EXPECT_EQ(span_tiles(171, kSplitWideTile, TileSpan::wide), 1);
  EXPECT_EQ(span_tiles(171, kSplitNarrowTile, TileSpan::narrow), 1);
  EXPECT_EQ(span_first_row(171, TileSpan::narrow), 128);
  EXPECT_EQ(span_tiles(200, kSplitWideTile, TileSpan::wide), 2);  // 72 rows left: a wide tile
  EXPECT_EQ(span_tiles(200, kSplitNarrowTile, TileSpan::narrow), 0);
  // The width split at 48 rows: 43 rows are one narrow tile; 50 one wide; 107 = 64 + 43 one each;
  // in the split, 171 = 128 + 43 a wide tile and the narrow one at 48, none at 64.
  EXPECT_EQ(span_tiles(171, 64, TileSpan::narrow, SpanCut{128, 48, 0}), 1);
  EXPECT_EQ(span_tiles(171, 64, TileSpan::narrow, SpanCut{128, 64, 48}), 0);
  EXPECT_EQ(span_tiles(180, 64, TileSpan::narrow, SpanCut{128, 64, 48}), 1);
  const SpanCut w6{64, 48, 0};
  EXPECT_EQ(span_tiles(43, 64, TileSpan::narrow, w6), 1);
  EXPECT_EQ(span_tiles(43, 64, TileSpan::wide, w6), 0);
  EXPECT_EQ(span_tiles(50, 64, TileSpan::wide, w6), 1);
  EXPECT_EQ(span_tiles(50, 64, TileSpan::narrow, w6), 0);
  EXPECT_EQ(span_tiles(107, 64, TileSpan::wide, w6), 1);
  EXPECT_EQ(span_first_row(107, TileSpan::narrow, w6), 64);
  // Folded at 24 rows, three tiles: 30 rows are tiles of 24 and 6, none wide; 94 = 64 + 30 a
  // wide tile and the same two from row 64; 63 three narrow tiles (24 + 24 + 15).
  const SpanCut w3f{64, 24, 0, 3};
  EXPECT_EQ(span_tiles(30, 64, TileSpan::narrow, w3f), 2);
  EXPECT_EQ(span_tiles(30, 64, TileSpan::wide, w3f), 0);
  EXPECT_EQ(span_row(30, 0, 64, 23, TileSpan::narrow, w3f), 23);
  EXPECT_EQ(span_row(30, 0, 64, 24, TileSpan::narrow, w3f), -1);  // tile 1's row
  EXPECT_EQ(span_row(30, 1, 64, 0, TileSpan::narrow, w3f), 24);
  EXPECT_EQ(span_row(30, 1, 64, 6, TileSpan::narrow, w3f), -1);
  EXPECT_EQ(span_tiles(94, 64, TileSpan::wide, w3f), 1);
  EXPECT_EQ(span_tiles(94, 64, TileSpan::narrow, w3f), 2);
  EXPECT_EQ(span_row(94, 1, 64, 5, TileSpan::narrow, w3f), 93);
  EXPECT_EQ(span_tiles(63, 64, TileSpan::narrow, w3f), 3);
  EXPECT_EQ(span_tiles(63, 64, TileSpan::wide, w3f), 0);
  // Folded twice at 24 rows: 49..63 left are a wide tile.
  EXPECT_EQ(span_tiles(50, 64, TileSpan::wide, SpanCut{64, 24, 0, 2}), 1);
  EXPECT_EQ(span_tiles(50, 64, TileSpan::narrow, SpanCut{64, 24, 0, 2}), 0);
  // The wide width at 96 rows: 342 = 256 + 86 is two wide tiles and a last one at 96; 350 = 256
  // + 94 too; 360 = 256 + 104 three wide tiles.
  const SpanCut v12{128, 96, 0}, v12_tile{128, 96, 64};
  EXPECT_EQ(span_tiles(342, 128, TileSpan::wide, v12), 2);
  EXPECT_EQ(span_tiles(342, 128, TileSpan::narrow, v12_tile), 1);
  EXPECT_EQ(span_first_row(342, TileSpan::narrow, v12_tile), 256);
  EXPECT_EQ(span_tiles(350, 128, TileSpan::narrow, v12_tile), 1);
  EXPECT_EQ(span_tiles(360, 128, TileSpan::wide, v12), 3);
  EXPECT_EQ(span_tiles(360, 128, TileSpan::narrow, v12_tile), 0);
  EXPECT_EQ(span_tiles(320, 128, TileSpan::narrow, v12_tile), 0);  // 64 left: the 64-token launch's
}

// The sm90 path's bf16 staging of NVFP4 activations: scratch exactly where choose_sm90_config
// takes both GEMMs (so that the workspace sized for T and the forward at T decide alike), two
// 256-byte aligned, disjoint sub-buffers of row_space x max(H, I) and row_space x I bf16.
TEST(CudaGemmConfig, Sm90StagingScratch) {
  std::mt19937_64 rng(21);
  int used = 0, one_only = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int64_t E = 1 + int64_t(rng() % 384);
    const int64_t rows_bound = int64_t(rng() % (trial % 2 ? 300 : 140000));
    const int64_t row_space = rows_bound + int64_t(rng() % 100);
    const int64_t H = 16 * (1 + int64_t(rng() % 500)), I = 16 * (1 + int64_t(rng() % 300));
    const int block = trial % 3 == 0 ? kMxfp4Block : kNvfp4Block;
    const int sms = trial % 4 == 0 ? 78 : 132;
    const Sm90Staging st = sm90_staging(rows_bound, row_space, E, H, I, block, sms);
    // Each GEMM decides on its own waves: staged only where both take the wgmma kernels.
    const auto take = [&](int64_t N, int64_t K) {
      return choose_sm90_config(
                 {.rows_bound = rows_bound, .num_experts = E, .N = int(N), .K = int(K), .num_sms = sms, .block = block})
          .use;
    };
    const bool take1 = take(2 * I, H), take2 = take(H, I);
    ASSERT_EQ(st.use, take1 && take2) << "rows_bound " << rows_bound << " E " << E << " block " << block;
    one_only += take1 != take2;
    if (!st.use) {
      ASSERT_EQ(st.bytes, 0u);
      continue;
    }
    ++used;
    // a_bf16: x logical or h k-permuted (rows of kperm_row(I)); h_bf16: h k-permuted
    const size_t a_bytes = size_t(row_space * std::max(H, kperm_row(I)) * 2), h_bytes = size_t(row_space * kperm_row(I) * 2);
    ASSERT_EQ(st.a_bf16 % 256, 0u);
    ASSERT_EQ(st.h_bf16 % 256, 0u);
    ASSERT_GE(st.h_bf16, st.a_bf16 + a_bytes);  // disjoint: a_bf16 first
    ASSERT_GE(st.bytes, st.h_bf16 + h_bytes);
    ASSERT_LT(st.bytes, a_bytes + h_bytes + 512);  // no more than the alignment padding
  }
  EXPECT_GT(used, 100);
  EXPECT_GT(one_only, 0);  // the case staging_refusal declines
  // kimi-k2 (H = 7168, I = 2048, E = 384, k = 8): T = 2048 (43 rows per expert) and T = 16384
  // stage through 288 MiB and 2.25 GiB; T = 512 (11 rows per expert) runs the fast path.
  EXPECT_EQ(sm90_staging(2048 * 8, 2048 * 8, 384, 7168, 2048, kNvfp4Block, 132).bytes,
            size_t(2048) * 8 * (7168 + 2048) * 2);
  EXPECT_EQ(sm90_staging(16384 * 8, 16384 * 8, 384, 7168, 2048, kNvfp4Block, 132).bytes,
            size_t(16384) * 8 * (7168 + 2048) * 2);
  EXPECT_FALSE(sm90_staging(512 * 8, 512 * 8, 384, 7168, 2048, kNvfp4Block, 132).use);
  EXPECT_EQ(sm90_staging(512 * 8, 512 * 8, 384, 7168, 2048, kNvfp4Block, 132).bytes, 0u);
  EXPECT_EQ(sm90_staging(0, 0, 384, 7168, 2048, kNvfp4Block, 132).bytes, 0u);
}

// The staging dequantization's value function: every e2m1 code times every finite e4m3 scale
// (subnormals, zero and negative scales included) is exactly a bf16, and nvfp4_value_bf16 is it.
TEST(CudaGemmLayout, Nvfp4ValueBf16IsExact) {
  for (int sc = 0; sc < 256; ++sc) {
    if ((sc & 0x7F) == 0x7F) continue;  // NaN
    const float s = e4m3_to_f32(uint8_t(sc));
    for (int c = 0; c < 16; ++c) {
      const double want = e2m1(uint8_t(c)) * double(s);  // exact in double
      const uint16_t got = nvfp4_value_bf16(uint8_t(c), s);
      ASSERT_EQ(double(bf16_to_f32(got)), want) << "code " << c << " scale " << sc;
      ASSERT_EQ(got, bf16_from_f32(e2m1_to_f32(uint8_t(c)) * e4m3_to_f32(uint8_t(sc)))) << "code " << c << " scale " << sc;
      if (want != 0.0) {  // a normal bf16: at least 2^-10, at most 6 * 448
        ASSERT_GE(std::fabs(want), std::ldexp(1.0, -10));
        ASSERT_LE(std::fabs(want), 2688.0);
      }
    }
  }
  EXPECT_NE(nvfp4_value_bf16(3, e4m3_to_f32(0x7F)) & 0x7FFFu, 0x7F80u);  // a NaN scale gives a NaN, not inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(nvfp4_value_bf16(3, e4m3_to_f32(0x7F)))));
}

// On an sm_90 device a build with sm_90a code runs the wgmma kernels (CudaGemmCases *_sm90 then
// check their launches); anywhere else this says why they do not run.
TEST(CudaGemmSm90, RunsOnHopper) {
  SKIP_WITHOUT_GPU();
  const std::string why = why_no_sm90(0);
  const bool hopper = compute_capability(0) == 90;
  const bool built = std::string(compiled_archs()).find("sm_90a") != std::string::npos;
  if (hopper && built) ASSERT_EQ(why, "");
  if (!why.empty()) GTEST_SKIP() << "the sm90 path runs the fast path here: " << why;
  EXPECT_EQ(why_no_sm90(0), why);  // cached, the same answer
}

// kimi-k2's expert shapes (H = 7168, I = 2048: 112 and 32 k-blocks, 16 and 28 row tiles) at
// prefill size, too large for the host computation: the wgmma kernels against the fast path.
// Both are exact up to the order of the fp32 sums (SPEC §4), so h (bf16) may differ by a
// rounding and y by fp32 reordering; a layout or pipeline error differs by O(1).
class CudaGemmSm90Kernels : public ::testing::TestWithParam<Sm90Kernel> {};

TEST_P(CudaGemmSm90Kernels, MatchesFastOnKimiShapes) {
  SKIP_WITHOUT_GPU();
  if (const std::string why = why_no_sm90(0); !why.empty()) GTEST_SKIP() << "no wgmma kernels here: " << why;
  const Sm90KernelScope scope(GetParam());
  const int64_t ws_before = sm90_ws_launches(), rsws_before = sm90_rsws_launches(),
                rsws4_before = sm90_rsws4_launches();
  // 128-token tiles (99 rows per active expert): 300 rows are 3 tiles (the last of 44); 129: 2
  // (the last of 1); 64 and 1: one partial. rsws4 (64-token tiles, 139 per expert): 300 rows
  // are 5 tiles (the last of 44), 200 4 (the last of 8), 129 3 (the last of 1), 64 one full.
  // split: 300 rows are 2 wide tiles and a narrow one of 44, 129 a wide and a narrow of 1, 64
  // and 1 a narrow each.
  const bool wide = GetParam() == Sm90Kernel::rsws4;
  const bool split = GetParam() == Sm90Kernel::split;
  const Spec s{"kimi_shapes", 7168, 2048, 5, WeightFormat::nvfp4, false, Activation::silu, false,
               wide ? std::vector<int32_t>{300, 200, 129, 64, 1} : std::vector<int32_t>{300, 129, 0, 64, 1}, false, 41};
  const Problem p = make_problem(s);
  const auto dw = upload_weights(p.w, 0);
  ASSERT_TRUE(choose_sm90_config({p.rows_bound, s.E, int(2 * s.I), int(s.H)}).use);
  const auto covered = covered_rows(p);
  // Elements that differ by more than `rel` of their size plus `abs_rms` of the rms of `a`.
  auto compare = [&](const std::vector<float>& a, const std::vector<float>& b, int64_t cols, double rel,
                     double abs_rms, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    double ss = 0;
    int64_t n = 0;
    for (size_t i = 0; i < a.size(); ++i)
      if (covered[i / size_t(cols)]) ss += double(a[i]) * a[i], ++n;
    const double rms = std::sqrt(ss / double(std::max<int64_t>(n, 1)));
    int64_t bad = 0;
    std::string first;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!covered[i / size_t(cols)]) continue;
      const double d = std::fabs(double(a[i]) - double(b[i]));
      if (!(d <= rel * std::fabs(double(a[i])) + abs_rms * rms) && bad++ == 0)
        first = std::string(what) + "[row " + std::to_string(i / size_t(cols)) + ", col " +
                std::to_string(i % size_t(cols)) + "]: fast " + std::to_string(a[i]) + ", sm90 " + std::to_string(b[i]);
    }
    EXPECT_GT(rms, 0.0) << what;
    EXPECT_EQ(bad, 0) << bad << " of " << n << " elements differ; first: " << first;
  };
  const int64_t before = sm90_launches();
  const Gemm1Out fast1 = run_gemm1(*dw, p, GemmPath::fast), wg1 = run_gemm1(*dw, p, GemmPath::sm90);
  EXPECT_EQ(sm90_launches() - before, 1);
  expect_untouched(wg1.h, covered, size_t(s.I * 2), "h_bf16");
  std::vector<float> hf, hw;
  for (uint16_t v : payload<uint16_t>(fast1.h)) hf.push_back(bf16_to_f32(v));
  for (uint16_t v : payload<uint16_t>(wg1.h)) hw.push_back(bf16_to_f32(v));
  compare(hf, hw, s.I, 1.0 / 64, 1e-3, "h");

  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a2(size_t(p.row_space * s.I));
  for (auto& v : a2) v = bf16_from_f32(normal(rng));
  const auto yf = run_gemm2(*dw, p, GemmPath::fast, a2, {}, {}, 1.0f);
  const auto yw = run_gemm2(*dw, p, GemmPath::sm90, a2, {}, {}, 1.0f);
  EXPECT_EQ(sm90_launches() - before, 2);
  expect_untouched(yw, covered, size_t(s.H * 4), "y");
  compare(payload<float>(yf), payload<float>(yw), s.H, 1e-4, 1e-4, "y");
  EXPECT_EQ(sm90_ws_launches() - ws_before, GetParam() == Sm90Kernel::ws ? 2 : 0);
  EXPECT_EQ(sm90_rsws_launches() - rsws_before, GetParam() == Sm90Kernel::rsws || split ? 2 : 0);
  EXPECT_EQ(sm90_rsws4_launches() - rsws4_before, wide || split ? 2 : 0);
  EXPECT_EQ(choose_sm90_config({p.rows_bound, s.E, int(2 * s.I), int(s.H)}).token_tile, wide ? 64 : 128);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaGemmSm90Kernels,
                         ::testing::Values(Sm90Kernel::rs, Sm90Kernel::ws, Sm90Kernel::rsws, Sm90Kernel::rsws4,
                                           Sm90Kernel::split),
                         [](const auto& info) {
                           return std::string(info.param == Sm90Kernel::ws          ? "ws"
                                              : info.param == Sm90Kernel::rsws      ? "rsws"
                                              : info.param == Sm90Kernel::rsws4     ? "rsws4"
                                              : info.param == Sm90Kernel::split     ? "split"
                                                                                    : "rs");
                         });

// Sets the width split's narrow width (set_sm90_narrow_width) and the persistent kernels' grid
// limit for its lifetime, then restores the defaults.
class NarrowWidthScope {
 public:
  NarrowWidthScope(int width, int ctas) {
    set_sm90_narrow_width(width);
    set_sm90_ws_grid_limit(ctas);
  }
  ~NarrowWidthScope() {
    set_sm90_narrow_width(0);
    set_sm90_ws_grid_limit(0);
  }
  NarrowWidthScope(const NarrowWidthScope&) = delete;
};

// Sets rsws4's width split's fold (set_sm90_narrow_fold) for its lifetime, then restores the
// default.
class NarrowFoldScope {
 public:
  explicit NarrowFoldScope(int fold) { set_sm90_narrow_fold(fold); }
  ~NarrowFoldScope() { set_sm90_narrow_fold(0); }
  NarrowFoldScope(const NarrowFoldScope&) = delete;
};

// GEMM 1 on the sm90 path, then GEMM 2 on its h (bf16, or NVFP4 for W4A4): GEMM 1's outputs and y.
std::pair<Gemm1Out, std::vector<uint8_t>> run_sm90_gemms(const Spec& spec, const Problem& p, const DeviceWeights& dw) {
  Gemm1Out o1 = run_gemm1(dw, p, GemmPath::sm90);
  std::vector<uint8_t> y =
      spec.w4a4 ? run_gemm2(dw, p, GemmPath::sm90, {}, payload<uint8_t>(o1.fp4), payload<uint8_t>(o1.scale), 0.21f)
                : run_gemm2(dw, p, GemmPath::sm90, payload<uint16_t>(o1.h), {}, {}, 1.0f);
  return {std::move(o1), std::move(y)};
}

// The width split (Sm90Config::narrow_width) at every narrow width, forced (the narrow_* cases,
// fewer than 64 rows per expert, have too few units for the default to split), on rsws4's
// 64-token tiles (unfolded and folded: Sm90Config::narrow_fold) and on the split's last tiles:
// against the host (check_problem: every covered element, nothing written outside the
// outputs, the same bytes twice) on one CTA per SM and on 3 CTAs that walk many units each;
// and, bit for bit, what the same kernels compute at width 8 (no width split): a narrower
// wgmma computes each token's column as the full one does. One test per narrow_* case, so that
// a sanitizer run can take them one at a time.
std::vector<int> narrow_spec_indices() {
  std::vector<int> v;
  const std::vector<Spec> all = specs();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name.rfind("narrow_", 0) == 0) v.push_back(int(i));
  return v;
}

TEST(CudaGemmSm90, NarrowCasesCount) { EXPECT_EQ(narrow_spec_indices().size(), 6u); }

class CudaGemmSm90Widths : public ::testing::TestWithParam<int> {};

TEST_P(CudaGemmSm90Widths, WidthSplitAtEveryWidth) {
  SKIP_WITHOUT_GPU();
  if (const std::string why = why_no_sm90(0); !why.empty()) GTEST_SKIP() << "no wgmma kernels here: " << why;
  const Spec spec = specs()[size_t(GetParam())];  // a copy: specs() returns by value
  SCOPED_TRACE(describe(spec));
  const Problem p = make_problem(spec);
  const auto dw = upload_weights(p.w, 0);
  // Both GEMMs at `width` on `ctas` CTAs.
  auto run = [&](int width, int ctas) {
    const NarrowWidthScope widths(width, ctas);
    return run_sm90_gemms(spec, p, *dw);
  };
  for (const Sm90Kernel kernel : {Sm90Kernel::automatic, Sm90Kernel::split}) {
    SCOPED_TRACE(kernel == Sm90Kernel::split ? "split" : "rsws4");
    const Sm90KernelScope scope(kernel);
    for (const bool gemm1 : {true, false}) {
      const Sm90Config c = choose_sm90_config({.rows_bound = p.rows_bound,
                                               .num_experts = spec.E,
                                               .N = int(gemm1 ? 2 * spec.I : spec.H),
                                               .K = int(gemm1 ? spec.H : spec.I),
                                               .block = detail::weight_block(spec.wf)});
      ASSERT_EQ(sm90_kernel_for(c), kernel == Sm90Kernel::split ? Sm90Kernel::split : Sm90Kernel::rsws4) << c.why;
    }
    int64_t before = sm90_width_split_launches();
    const auto [base1, base2] = run(8, 0);
    EXPECT_EQ(sm90_width_split_launches() - before, 0) << "width 8: no width split";
    for (int w = kMinNarrowWidth; w <= kMaxNarrowWidth; ++w)
      for (const int ctas : {0, 3}) {
        SCOPED_TRACE("width " + std::to_string(w) + ", grid limit " + std::to_string(ctas));
        before = sm90_width_split_launches();
        const auto [o1, y] = run(w, ctas);
        EXPECT_EQ(sm90_width_split_launches() - before, 2) << "both GEMMs width split";
        EXPECT_TRUE(o1.h == base1.h) << "h_bf16 differs from width 8's";
        EXPECT_TRUE(o1.fp4 == base1.fp4 && o1.scale == base1.scale) << "NVFP4 h differs from width 8's";
        EXPECT_TRUE(y == base2) << "y differs from width 8's";
        const NarrowWidthScope widths(w, ctas);
        check_problem(spec, GemmPath::sm90);
        if (kernel == Sm90Kernel::split) continue;
        // rsws4's fold: unfolded (1), the least fold and the most (8: as many as 64 rows need).
        for (const int fold : {1, 2, 8}) {
          SCOPED_TRACE("fold " + std::to_string(fold));
          const NarrowFoldScope folds(fold);
          const int64_t folded = sm90_folded_launches();
          const auto [f1, fy] = run(w, ctas);
          EXPECT_EQ(sm90_folded_launches() - folded, fold > 1 ? 2 : 0) << "both GEMMs folded or neither";
          EXPECT_TRUE(f1.h == base1.h) << "h_bf16 differs from width 8's";
          EXPECT_TRUE(f1.fp4 == base1.fp4 && f1.scale == base1.scale) << "NVFP4 h differs from width 8's";
          EXPECT_TRUE(fy == base2) << "y differs from width 8's";
          if (fold == 8) check_problem(spec, GemmPath::sm90);
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Narrow, CudaGemmSm90Widths, ::testing::ValuesIn(narrow_spec_indices()),
                         [](const auto& info) { return specs()[size_t(info.param)].name; });

// Sets the split's wide width (set_sm90_wide_width) for its lifetime, then restores the default.
class WideWidthScope {
 public:
  explicit WideWidthScope(int width) { set_sm90_wide_width(width); }
  ~WideWidthScope() { set_sm90_wide_width(0); }
  WideWidthScope(const WideWidthScope&) = delete;
};

// The split's wide width (Sm90Config::wide_width) at every wide width, forced on the split
// (the split_partial_* cases, last tiles of 65..127 rows), alone and with a width split at
// n32 on 3 CTAs that walk many units each: against the host (check_problem), and, bit for bit,
// what the split computes without it (a narrower wgmma computes each token's column as the
// full one does) and what it computes with its launches not chained by PDL.
TEST(CudaGemmSm90, WideWidthAtEveryWidth) {
  SKIP_WITHOUT_GPU();
  if (const std::string why = why_no_sm90(0); !why.empty()) GTEST_SKIP() << "no wgmma kernels here: " << why;
  const Sm90KernelScope scope(Sm90Kernel::split);
  int cases = 0;
  for (const Spec& spec : specs()) {
    if (spec.name.rfind("split_partial_", 0) != 0) continue;
    ++cases;
    SCOPED_TRACE(describe(spec));
    const Problem p = make_problem(spec);
    const auto dw = upload_weights(p.w, 0);
    auto run = [&] { return run_sm90_gemms(spec, p, *dw); };
    int64_t before = sm90_wide_width_launches();
    const auto [base1, base2] = [&] {
      const WideWidthScope wide(16);
      const NarrowWidthScope narrow(8, 0);
      return run();
    }();
    EXPECT_EQ(sm90_wide_width_launches() - before, 0) << "wide width 16: none";
    for (const int v : kWideWidths)
      for (const auto& [w, ctas] : {std::pair{8, 0}, std::pair{4, 3}}) {
        SCOPED_TRACE("wide width " + std::to_string(v) + ", narrow width " + std::to_string(w) + ", grid limit " +
                     std::to_string(ctas));
        const WideWidthScope wide(v);
        const NarrowWidthScope narrow(w, ctas);
        before = sm90_wide_width_launches();
        const auto [o1, y] = run();
        EXPECT_EQ(sm90_wide_width_launches() - before, 2) << "both GEMMs at the wide width";
        EXPECT_TRUE(o1.h == base1.h) << "h_bf16 differs from the split's without a wide width";
        EXPECT_TRUE(o1.fp4 == base1.fp4 && o1.scale == base1.scale) << "NVFP4 h differs";
        EXPECT_TRUE(y == base2) << "y differs from the split's without a wide width";
        check_problem(spec, GemmPath::sm90);
      }
    // The split's launches after the first as programmatic dependents of the one before (the
    // default) or launched normally (FP4MOE_SM90_PDL=0): the same bits, with every launch (the
    // wide width's and the width split's too).
    {
      const WideWidthScope wide(kWideWidths[0]);
      const NarrowWidthScope narrow(4, 3);
      const auto [o1, y] = run();
      const fp4moe::testing::EnvVar off("FP4MOE_SM90_PDL", "0");
      const auto [p1, py] = run();
      EXPECT_TRUE(p1.h == o1.h && p1.fp4 == o1.fp4 && p1.scale == o1.scale) << "GEMM 1 differs without PDL";
      EXPECT_TRUE(py == y) << "y differs without PDL";
      EXPECT_TRUE(y == base2) << "y differs from the split's without a wide width";
    }
  }
  EXPECT_EQ(cases, 5);
}

// W4A4 on the sm90 path (NVFP4 A staged to bf16, the wgmma kernels, bf16 h requantized) against
// the fast path (NVFP4 A decoded in registers, h requantized in the GEMM-1 epilogue), on
// kimi-k2's expert shapes with the A rows read through a gather.
//
// What "the same bytes" can mean here: both paths compute h exactly up to the order of the
// fp32 sums (SPEC §4), and wgmma and mma.sync need not round their partial sums alike, so a
// bf16 h element may differ by one rounding between them. Where the 16 bf16 h of a block are
// bitwise equal, the requantization must give the same 8 code bytes and scale byte (the staged
// route does the epilogue's arithmetic: that is the bit-identity checked here). Where they
// differ, a code or scale changes only if the value sits at an e2m1 / e4m3 rounding boundary:
// rare (a one-rounding change of h moves h / scale by <= 6 * 2^-8, so it crosses one of the
// boundaries of the codes for a small fraction of those elements). Hence: >= 99% of all code and
// scale bytes equal, and the dequantized h within 1e-2 relative L2 (a handful of code steps).
TEST(CudaGemmSm90, W4A4MatchesFast) {
  SKIP_WITHOUT_GPU();
  const bool wgmma = why_no_sm90(0).empty();
  // 300 rows: 3 tiles of 128 (the last of 44); 129: 2 (the last of 1); 64: one tile.
  const Spec s{"kimi_shapes_w4a4", 7168, 2048, 4, WeightFormat::nvfp4, true, Activation::silu, false,
               {300, 129, 0, 64}, false, 43};
  const Problem p = make_problem(s);
  const auto dw = upload_weights(p.w, 0);
  const int64_t H = s.H, I = s.I;
  ASSERT_TRUE(choose_sm90_config({p.rows_bound, s.E, int(2 * I), int(H)}).use);
  const Sm90Staging st = sm90_staging(p.rows_bound, p.row_space, s.E, H, I, kNvfp4Block, multiprocessor_count(0));
  ASSERT_TRUE(st.use);
  // without wgmma, the scratch holds the bf16 copy of A only: row_space x max(H, I) bf16
  const size_t a_copy = (size_t(p.row_space) * size_t(std::max(H, I)) * 2 + 255) / 256 * 256;
  EXPECT_EQ(gemm_scratch_bytes(*dw, GemmPath::sm90, p.rows_bound, p.row_space), wgmma ? st.bytes : a_copy);
  EXPECT_EQ(gemm_scratch_bytes(*dw, GemmPath::fast, p.rows_bound, p.row_space), 0u);
  const auto covered = covered_rows(p);

  // ---- gemm1 ----
  const int64_t before = sm90_launches();
  const Gemm1Out fast = run_gemm1(*dw, p, GemmPath::fast);
  EXPECT_EQ(sm90_launches() - before, 0);
  const Gemm1Out wg = run_gemm1(*dw, p, GemmPath::sm90);
  EXPECT_EQ(sm90_launches() - before, wgmma ? 1 : 0) << "wgmma launches for gemm1";
  // NVFP4 h only: the bf16 h goes to the scratch; the same bytes, and no bf16 h written.
  const Gemm1Out wg_q = run_gemm1(*dw, p, GemmPath::sm90, false);
  EXPECT_EQ(sm90_launches() - before, wgmma ? 2 : 0);
  EXPECT_TRUE(wg_q.fp4 == wg.fp4 && wg_q.scale == wg.scale) << "NVFP4 h differs with and without the bf16 h";
  for (uint8_t b : wg_q.h) ASSERT_EQ(b, kPoison) << "bf16 h written though not asked for";
  expect_untouched(wg.h, covered, size_t(I * 2), "h_bf16");
  expect_untouched(wg.fp4, covered, size_t(I / 2), "h_fp4");
  expect_untouched(wg.scale, covered, size_t(I / 16), "h_scale");

  const auto hf = payload<uint16_t>(fast.h), hw = payload<uint16_t>(wg.h);
  const auto qf = payload<uint8_t>(fast.fp4), qw = payload<uint8_t>(wg.fp4);
  const auto sf = payload<uint8_t>(fast.scale), sw = payload<uint8_t>(wg.scale);
  int64_t blocks = 0, same_h_blocks = 0, same_bytes = 0, bytes = 0, exact_bad = 0, h_bad = 0;
  double hss = 0, dss = 0, ref_ss = 0;
  std::string first;
  for (int64_t r = 0; r < p.row_space; ++r) {
    if (!covered[size_t(r)]) continue;
    for (int64_t b = 0; b < I / 16; ++b) {
      ++blocks;
      bool same_h = true;
      for (int64_t i = b * 16; i < b * 16 + 16; ++i) {
        const size_t at = size_t(r * I + i);
        same_h = same_h && hf[at] == hw[at];
        const double x = bf16_to_f32(hf[at]), y = bf16_to_f32(hw[at]);
        hss += x * x;
        if (!(std::fabs(x - y) <= std::fabs(x) / 64 + 1e-30) && h_bad++ == 0)
          first = "h[row " + std::to_string(r) + ", i " + std::to_string(i) + "]: fast " + std::to_string(x) +
                  ", sm90 " + std::to_string(y);
        // the dequantized NVFP4 h of both paths (the global scale 1/gs left out)
        const auto deq = [&](const std::vector<uint8_t>& q, const std::vector<uint8_t>& sc) {
          const uint8_t byte = q[size_t(r * I / 2 + i / 2)];
          return e2m1((i & 1) ? byte >> 4 : byte & 15) * double(e4m3_to_f32(sc[size_t(r * I / 16 + b)]));
        };
        const double df = deq(qf, sf), dw2 = deq(qw, sw);
        dss += (df - dw2) * (df - dw2);
        ref_ss += df * df;
      }
      const size_t q0 = size_t(r * I / 2 + b * 8), s0 = size_t(r * I / 16 + b);
      bool same_q = sf[s0] == sw[s0];
      same_bytes += sf[s0] == sw[s0];
      for (size_t j = q0; j < q0 + 8; ++j) {
        same_q = same_q && qf[j] == qw[j];
        same_bytes += qf[j] == qw[j];
      }
      bytes += 9;
      if (same_h) {
        ++same_h_blocks;
        if (!same_q && exact_bad++ == 0)
          first = "block [row " + std::to_string(r) + ", " + std::to_string(b) +
                  "]: equal bf16 h, different NVFP4 bytes (scale fast " + std::to_string(sf[s0]) + ", sm90 " +
                  std::to_string(sw[s0]) + ")";
      }
    }
  }
  EXPECT_GT(hss, 0.0);
  EXPECT_EQ(h_bad, 0) << "bf16 h beyond 1/64 relative; first: " << first;
  EXPECT_EQ(exact_bad, 0) << exact_bad << " of " << same_h_blocks
                          << " blocks with bitwise-equal bf16 h requantized differently; first: " << first;
  EXPECT_GT(same_h_blocks, 0) << "no block with bitwise-equal bf16 h: the bit-identity was not checked";
  EXPECT_GE(double(same_bytes), 0.99 * double(bytes)) << same_bytes << " of " << bytes << " NVFP4 h bytes equal";
  EXPECT_LE(std::sqrt(dss / std::max(ref_ss, 1e-300)), 1e-2) << "dequantized NVFP4 h, relative L2";
  std::printf("[ info ] %lld of %lld h blocks bitwise equal in bf16, %lld of %lld NVFP4 bytes equal\n",
              (long long)same_h_blocks, (long long)blocks, (long long)same_bytes, (long long)bytes);

  // ---- gemm2, NVFP4 A (h-shaped, fresh random codes and scales) ----
  std::mt19937_64 rng(8);
  std::vector<uint8_t> a2q(size_t(p.row_space * I / 2)), a2s(size_t(p.row_space * I / 16));
  for (auto& b : a2q) b = uint8_t(rng());
  for (auto& b : a2s) b = random_e4m3(rng);
  const int64_t before2 = sm90_launches();
  const auto yf = payload<float>(run_gemm2(*dw, p, GemmPath::fast, {}, a2q, a2s, 0.21f));
  const auto yw_all = run_gemm2(*dw, p, GemmPath::sm90, {}, a2q, a2s, 0.21f);
  EXPECT_EQ(sm90_launches() - before2, wgmma ? 1 : 0) << "wgmma launches for gemm2";
  expect_untouched(yw_all, covered, size_t(H * 4), "y");
  const auto yw = payload<float>(yw_all);
  double ess = 0, yss = 0;
  for (size_t i = 0; i < yf.size(); ++i) {
    if (!covered[i / size_t(H)]) continue;
    ess += (double(yf[i]) - double(yw[i])) * (double(yf[i]) - double(yw[i]));
    yss += double(yf[i]) * double(yf[i]);
  }
  EXPECT_GT(yss, 0.0);
  EXPECT_LE(std::sqrt(ess / std::max(yss, 1e-300)), 1e-5) << "gemm2 y, relative L2 to the fast path";
  EXPECT_TRUE(run_gemm2(*dw, p, GemmPath::sm90, {}, a2q, a2s, 0.21f) == yw_all) << "gemm2 differs between two runs";
}

// W4A4 where only GEMM 1 takes the wgmma kernels (each GEMM decides on its own waves of units):
// nothing is staged for h (sm90_staging), so GEMM 1 must decline too and run the fast path, its
// outputs bit for bit the fast path's. 8 experts of 17 rows (rows_bound 141: 18 per expert):
// GEMM 1 (2I rows of 256-row tiles) has at least kSm90WidthSplitMinWaves waves on this device,
// so 18 rows take it; GEMM 2 (H = 64, one tile per expert) has a fraction of one, so it needs
// kSm90MinRowsFewestWaves.
TEST(CudaGemmSm90, W4A4OnlyGemm1WouldTakeWgmma) {
  SKIP_WITHOUT_GPU();
  const int sms = multiprocessor_count(0);
  const int64_t E = 8, H = 64, I = 128 * ((int64_t(kSm90WidthSplitMinWaves) * sms + E - 1) / E);
  const Spec s{"w4a4_gemm1_only", H, I, E, WeightFormat::nvfp4, true, Activation::silu, false,
               std::vector<int32_t>(size_t(E), kSm90MinRowsFewWaves - 1), false, 47};
  const Problem p = make_problem(s);
  ASSERT_EQ((p.rows_bound + E - 1) / E, kSm90MinRowsFewWaves);
  ASSERT_TRUE(
      choose_sm90_config({.rows_bound = p.rows_bound, .num_experts = E, .N = int(2 * I), .K = int(H), .num_sms = sms})
          .use);
  ASSERT_FALSE(
      choose_sm90_config({.rows_bound = p.rows_bound, .num_experts = E, .N = int(H), .K = int(I), .num_sms = sms}).use);
  EXPECT_FALSE(sm90_staging(p.rows_bound, p.row_space, E, H, I, kNvfp4Block, sms).use);
  const auto dw = upload_weights(p.w, 0);
  // the bf16 copy of A only
  EXPECT_EQ(gemm_scratch_bytes(*dw, GemmPath::sm90, p.rows_bound, p.row_space),
            (size_t(p.row_space) * size_t(std::max(H, I)) * 2 + 255) / 256 * 256);
  const int64_t before = sm90_launches();
  const Gemm1Out fast = run_gemm1(*dw, p, GemmPath::fast);
  const Gemm1Out sm90 = run_gemm1(*dw, p, GemmPath::sm90);
  EXPECT_EQ(sm90_launches() - before, 0) << "GEMM 1 took the wgmma kernels with no h staging";
  EXPECT_TRUE(fast.h == sm90.h) << "bf16 h";
  EXPECT_TRUE(fast.fp4 == sm90.fp4) << "NVFP4 h codes";
  EXPECT_TRUE(fast.scale == sm90.scale) << "NVFP4 h scales";
  // and the host's GEMM 1 (the fast path's check)
  check_problem(s, GemmPath::sm90);
}

// The staged sm90 path declines to the fast path (no wgmma launch) without its scratch or with
// NVFP4 A through a gather of unknown row count, and still computes the same bytes.
TEST(CudaGemmSm90, W4A4WithoutScratchRunsFast) {
  SKIP_WITHOUT_GPU();
  const Spec s{"w4a4_no_scratch", 256, 96, 2, WeightFormat::nvfp4, true, Activation::silu, false, {100, 70}, false,
               44};
  const Problem p = make_problem(s);
  const auto dw = upload_weights(p.w, 0);
  Dev<int32_t> begin(p.begin), count(p.count), gather(p.gather);
  Dev<uint8_t> a_fp4(p.a_fp4), a_scale(p.a_scale);
  const size_t need = gemm_scratch_bytes(*dw, GemmPath::sm90, p.rows_bound, p.row_space);
  Guarded scratch(need + 256);
  auto run = [&](GemmPath path, float* part, size_t part_bytes, int64_t a_rows) {
    Guarded hq(size_t(p.row_space * kperm_row(s.I) / 2)), hs(size_t(p.row_space * s.I / 16));  // h k-permuted
    Gemm1Args a;
    a.rows = {begin.p, count.p, p.rows_bound, p.row_space};
    a.a_fp4 = a_fp4.p;
    a.a_scale = a_scale.p;
    a.a_dq = p.a_dq;
    a.a_gather = gather.p;
    a.a_rows = a_rows;
    a.h_fp4 = hq.ptr<uint8_t>();
    a.h_scale = hs.ptr<uint8_t>();
    a.h_gs = 7.0f;
    a.partials = part;
    a.partials_bytes = part_bytes;
    const int64_t before = sm90_launches();
    gemm1(*dw, a, path, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return std::make_pair(sm90_launches() - before, hq.all());
  };
  const auto ref = run(GemmPath::fast, nullptr, 0, p.T);
  using Case = std::tuple<float*, size_t, int64_t, const char*>;
  const std::vector<Case> cases = {{nullptr, 0, p.T, "no scratch"},
                                   {scratch.ptr<float>(), need > 0 ? need - 1 : 0, p.T, "scratch one byte short"},
                                   {scratch.ptr<float>(), need, 0, "a_rows unknown"},
                                   {scratch.ptr<float>(), need, p.row_space + 1, "a_rows past the row space"}};
  for (const auto& [part, bytes, a_rows, why] : cases) {
    SCOPED_TRACE(why);
    const auto got = run(GemmPath::sm90, part, bytes, a_rows);
    EXPECT_EQ(got.first, 0) << "the wgmma kernels ran";
    EXPECT_TRUE(got.second == ref.second) << "the fallback differs from the fast path";
  }
}

// The table decode of a fragment word: every stored code at every position of the logical
// word, permuted into memory order (frag_word_store, whose inverse frag_word_load is), decodes
// to the bf16 of e2m1 * 2^-126 (sign at bit 15, magnitude at bits 8-6), exactly; the stored
// code is the e2m1 code with bits 0 and 1 swapped; the host byte_perm follows PTX prmt.
TEST(CudaGemmLayout, FragmentWordDecodesEveryCode) {
  EXPECT_EQ(byte_perm(0x33221100u, 0x77665544u, 0x5140u), 0x55114400u);
  EXPECT_EQ(byte_perm(0x33221100u, 0x77665544u, 0x7362u), 0x77336622u);
  EXPECT_EQ(byte_perm(0x00008000u, 0u, 0x9999u), 0xFFFFFFFFu);  // sign replication
  for (uint32_t c = 0; c < 16; ++c) EXPECT_EQ(frag_stored_code(frag_stored_code(c)), c);
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20000; ++trial) {
    // every code at every nibble position in the first 16 x 8 trials, then random words
    uint32_t q = uint32_t(rng());
    if (trial < 16 * 8) q = (q & ~(15u << (4 * (trial % 8)))) | uint32_t(trial / 8) << (4 * (trial % 8));
    ASSERT_EQ(frag_word_load(frag_word_store(q)), q);
    uint32_t a[4];
    frag_decode_word(frag_word_store(q), a);
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const uint32_t code = frag_stored_code((q >> (8 * j + 4 * h)) & 15u);
        const uint32_t bits = (a[j] >> (16 * h)) & 0xFFFFu;
        ASSERT_EQ(bits, (code & 8u) << 12 | (code & 7u) << 6) << "word " << q << " j " << j << " half " << h;
        ASSERT_EQ(bits_f32(bits << 16), e2m1_to_f32(uint8_t(code)) * std::ldexp(1.0f, -126));
      }
  }
}

// The table decode on the GPU, with the selectors' upper halves moved down by shifts and by f16
// multiplies (the mma.sync kernels' sm80::kMmaSyncHighByF16), against the host decode: words
// with every value of their upper 16 bits (which alone decide a_1, and with zeros a_3), each with
// four random lower halves, then random words.
TEST(CudaGemmLayout, FragmentWordDecodesOnTheGpuByEitherHighHalf) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(20261206);
  std::vector<uint32_t> words;
  for (uint32_t high = 0; high < 65536; ++high)
    for (int r = 0; r < 4; ++r) words.push_back(high << 16 | (rng() & 0xFFFFu));
  for (int r = 0; r < 65536; ++r) words.push_back(rng());
  const int64_t n = int64_t(words.size());
  testing::DeviceBuffer d_words(words);
  for (bool high_by_f16 : {false, true}) {
    SCOPED_TRACE(high_by_f16 ? "by f16 multiplies" : "by shifts");
    testing::DeviceBuffer d_out(size_t(n) * 16);  // poisoned (0xFF)
    frag_decode_words_for_test(d_words.as<uint32_t>(), n, high_by_f16, d_out.as<uint32_t>(), nullptr);
    ck(cudaDeviceSynchronize(), "frag_decode_words_for_test");
    const auto got = d_out.download<uint32_t>();
    for (int64_t i = 0; i < n; ++i) {
      uint32_t want[4];
      frag_decode_word(words[size_t(i)], want);
      for (int j = 0; j < 4; ++j)
        ASSERT_EQ(got[size_t(4 * i + j)], want[j]) << "word " << words[size_t(i)] << " register " << j;
    }
  }
}

// ptx::high_half_by_f16_mul moves a value's upper half to both halves, exactly, for every upper
// half that is not a NaN (normals, subnormals, zeros, infinities), whatever the lower half; and
// every selector upper half of the table decode (and_or with kFragHighTable) is a normal f16.
TEST(CudaGemmLayout, HighHalfByF16MultiplyIsExact) {
  for (uint32_t v = 0; v < 65536; ++v) {
    const uint32_t sel = and_or(v, 0x3333u, kFragHighTable & 0xFFFFu), exponent = (sel >> 10) & 31u;
    ASSERT_TRUE(exponent >= 1 && exponent <= 30) << "selector half " << sel;
  }
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  std::vector<uint32_t> x;
  for (uint32_t high = 0; high < 65536; ++high) x.push_back(high << 16 | (rng() & 0xFFFFu));
  testing::DeviceBuffer d_x(x), d_out(x.size() * 4);
  high_half_by_f16_mul_for_test(d_x.as<uint32_t>(), int64_t(x.size()), d_out.as<uint32_t>(), nullptr);
  ck(cudaDeviceSynchronize(), "high_half_by_f16_mul_for_test");
  const auto got = d_out.download<uint32_t>();
  int checked = 0;
  for (uint32_t high = 0; high < 65536; ++high) {
    if ((high & 0x7C00u) == 0x7C00u && (high & 0x3FFu) != 0) continue;  // NaN
    ASSERT_EQ(got[high], high << 16 | high) << "upper half " << high;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 1023);
}

// Whether gemm1_activation_mid should take g: the argument of the activation's exp, -g
// (silu) or -(alpha * min(g, limit)) (swiglu_oai), within [-87, 87] (a NaN g is clamped to
// the limit by fminf).
bool mid_route_takes(float g, Activation act, float alpha, float limit) {
  const float x = act == Activation::silu ? -g : -(alpha * std::fmin(g, limit));
  return std::fabs(x) <= kActivationMidBound;
}

struct ActivationCase {
  Activation act;
  float alpha, limit;
  const char* name;
};
const ActivationCase kActivationCases[] = {{Activation::silu, 0.0f, 0.0f, "silu"},
                                           {Activation::swiglu_oai, 1.702f, 7.0f, "swiglu_oai"}};

// The epilogues' straight-line activation route on the host (its algebra: the rounding by
// 1.5 * 2^23, the one-step scale; the host's reciprocal is a division): the same bits as
// gemm1_activation for every g it takes, and it takes every g whose exp argument is within
// the bound. g: every 251st bit pattern, and every pattern near the bound, near 0 and near
// swiglu's bound -87 / alpha; u: random, any pattern or a moderate value.
TEST(CudaGemmActivation, MidRouteMatchesOnHost) {
  std::mt19937 rng(13);
  std::vector<uint32_t> gs;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 251) gs.push_back(uint32_t(b));
  for (const float centre : {87.0f, -87.0f, 0.0f, -87.0f / 1.702f, 44.0f})
    for (int d = -(1 << 15); d <= (1 << 15); ++d) gs.push_back(f32_bits(centre) + uint32_t(d));
  for (const auto& c : kActivationCases) {
    SCOPED_TRACE(c.name);
    int64_t taken = 0;
    for (const uint32_t gb : gs) {
      const float g = bits_f32(gb);
      const uint32_t mix = rng();
      const float u = mix % 2 ? bits_f32(rng()) : bits_f32((mix & 0x807FFFFFu) | 0x3F800000u);
      float h = 0.0f;
      const bool took = gemm1_activation_mid(g, u, c.act, c.alpha, c.limit, h);
      ASSERT_EQ(took, mid_route_takes(g, c.act, c.alpha, c.limit)) << "g bits " << gb;
      if (!took) continue;
      ++taken;
      const float want = gemm1_activation(g, u, c.act, c.alpha, c.limit);
      ASSERT_TRUE(f32_bits(h) == f32_bits(want) || (std::isnan(h) && std::isnan(want)))
          << "g " << g << " (bits " << gb << ") u " << u << ": " << h << " against " << want;
    }
    EXPECT_GT(taken, int64_t(gs.size()) / 4);
  }
}

// The same on the GPU for every one of the 2^32 fp32 g (activation_mid_sweep; the reciprocal
// is the device's MUFU.RCP and Newton step): no h differs from gemm1_activation's, and the
// route took exactly the g it should. Those are counted here from the bound: silu takes
// |g| <= 87 (the bit patterns 0..bits(87) of either sign); swiglu_oai takes every NaN g and
// every g from the most negative g0 with alpha * g >= -87 (rounded) up to +inf.
TEST(CudaGemmActivation, MidRouteMatchesEveryInputOnTheGpu) {
  FP4MOE_SKIP_WITHOUT_GPU();
  for (const auto& c : kActivationCases) {
    SCOPED_TRACE(c.name);
    uint64_t expect = 0;
    if (c.act == Activation::silu) {
      expect = 2 * (uint64_t(f32_bits(kActivationMidBound)) + 1);
    } else {
      float g0 = -kActivationMidBound / c.alpha;
      while (mid_route_takes(std::nextafter(g0, -INFINITY), c.act, c.alpha, c.limit)) g0 = std::nextafter(g0, -INFINITY);
      while (!mid_route_takes(g0, c.act, c.alpha, c.limit)) g0 = std::nextafter(g0, 0.0f);
      const uint64_t nans = 2 * ((uint64_t(1) << 23) - 1);
      expect = nans + (uint64_t(f32_bits(g0)) - 0x80000000u + 1) + (uint64_t(0x7F800000u) + 1);
    }
    uint64_t counts[2] = {};
    activation_mid_sweep(c.act, c.alpha, c.limit, counts);
    EXPECT_EQ(counts[0], expect) << "g taken by the route";
    EXPECT_EQ(counts[1], 0u) << "g whose h differs from gemm1_activation's";
  }
}

// The epilogues' bf16 rounding (bf16x2_from_f32: the hardware's conversion, format.h's NaN) on
// the GPU for every one of the 2^32 fp32 patterns, each paired with another: the same bits as
// bf16_from_f32, the format's one rounding (ties to even, subnormals kept, overflow to inf).
TEST(CudaGemmActivation, Bf16RoundingMatchesTheFormatOnEveryInput) {
  FP4MOE_SKIP_WITHOUT_GPU();
  EXPECT_EQ(bf16_rn_sweep(), 0u) << "value pairs whose bf16 bits differ from bf16_from_f32's";
}

// format.h's FP4 encoders (the requantization's) on the GPU for every one of the 2^32 fp32
// patterns: the same codes as on the host, where tests/test_format.cpp checks every pattern
// against oracles. Compared as checksums (fp4_encode_checksums).
TEST(CudaFormat, Fp4EncodersMatchTheHostOnEveryInput) {
  FP4MOE_SKIP_WITHOUT_GPU();
  uint64_t device[2] = {};
  fp4_encode_checksums(device);
  // the host's sums, in slices over the machine's threads (sums mod 2^64 in any order)
  std::vector<std::array<uint64_t, 2>> part(fp4moe::testing::pattern_slices(), {0, 0});
  fp4moe::testing::for_each_pattern_slice([&](unsigned t, uint64_t lo, uint64_t hi) {
    for (uint64_t i = lo; i < hi; ++i) {
      const float x = bits_f32(uint32_t(i));
      const uint64_t mix = fp4_encode_mix(uint32_t(i));
      part[t][0] += (uint64_t(e2m1_from_f32(x)) + 1) * mix;
      part[t][1] += (uint64_t(e4m3_from_f32(x)) + 1) * mix;
    }
  });
  uint64_t host[2] = {};
  for (const auto& p : part) host[0] += p[0], host[1] += p[1];
  EXPECT_EQ(device[0], host[0]) << "e2m1_from_f32: some pattern's code differs on the GPU";
  EXPECT_EQ(device[1], host[1]) << "e4m3_from_f32: some pattern's code differs on the GPU";
}

// The prepared layout as a whole, on the host: for every (expert, row, k) of random NVFP4
// (scales negative, zero and subnormal included) and MXFP4 matrices, the stored code and
// folded scale at frag_nibble / frag_scale, times 2^F from epi, give back exactly the
// canonical e2m1 * scale; padding past K holds zero codes.
TEST(CudaGemmLayout, PreparedFragmentsReproduceTheCheckpoint) {
  std::mt19937_64 rng(9);
  for (const int block : {16, 32}) {
    const int64_t E = 3;
    const int N = 48, K = block == 16 ? 80 : 96;  // Kp = 128: one padded column of blocks
    const int Kp = (K + kFragK - 1) / kFragK * kFragK;
    detail::HostBytes data(size_t(E * N * K / 2)), scale(size_t(E * N * K / block));
    for (auto& b : data) b = uint8_t(rng());
    for (auto& c : scale) {
      if (block == 32) {
        c = uint8_t(120 + rng() % 16);
        continue;
      }
      c = random_e4m3(rng) | (rng() % 4 == 0 ? 0x80 : 0);
      if ((c & 0x7F) == 0x7F) c = 0x7E;  // NaN codes are rejected by prepare
    }
    const std::vector<float> dq(size_t(E), 1.0f);
    // The row map as upload_weights gives it (device row -> checkpoint row): the identity, and
    // rows reversed (a map that is not, as w13's is not).
    int64_t (*const maps[])(int64_t, int64_t) = {[](int64_t r, int64_t) { return r; },
                                                  [](int64_t r, int64_t rows) { return rows - 1 - r; }};
    for (const auto row_map : maps) {
      const HostFragments f = build_fragments("w", data, scale, dq, E, N, K, block, row_map);
      ASSERT_EQ(f.q.size(), size_t(E * frag_expert_blocks(N, Kp) * kFragWords));
      ASSERT_EQ(f.scale.size(), size_t(E * frag_expert_blocks(N, Kp) * frag_scale_bytes(block)));
      for (int64_t e = 0; e < E; ++e) {
        // The group's 5 fragment rows past N (N = 48: 3 of 8): zero codes, zero scales.
        for (int nb = N / kFragRows; nb < frag_groups(N) * kFragGroup; ++nb)
          for (int kb = 0; kb < Kp / kFragK; ++kb) {
            const int64_t b = frag_block(e, nb, kb, frag_groups(N), Kp / kFragK);
            for (int i = 0; i < kFragWords; ++i) ASSERT_EQ(f.q[size_t(b * kFragWords + i)], 0u) << "pad row " << nb;
            for (int i = 0; i < frag_scale_bytes(block); ++i)
              ASSERT_EQ(f.scale[size_t(b * frag_scale_bytes(block) + i)], 0u) << "pad row " << nb;
          }
        const double two_f = double(f.epi[size_t(e)]);  // 2^F * dq, dq = 1
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < Kp; ++k) {
            const NibbleAt at = frag_nibble(e, n, k, N, Kp);
            const uint32_t code = frag_stored_code((frag_word_load(f.q[size_t(at.word)]) >> at.shift) & 15u);
            if (k >= K) {
              ASSERT_EQ(code & 7u, 0u) << "padding at k " << k;
              continue;
            }
            const int64_t cn = row_map(n, N);  // the checkpoint row of device row n
            const uint8_t byte = data[size_t((e * N + cn) * (K / 2) + k / 2)];
            const uint8_t canon = (k & 1) ? byte >> 4 : byte & 15;
            const uint8_t sc = scale[size_t((e * N + cn) * (K / block) + k / block)];
            const double want = double(e2m1_to_f32(canon)) *
                                (block == 16 ? double(e4m3_to_f32(sc)) : std::ldexp(1.0, int(sc) - 127));
            const double got = double(e2m1_to_f32(uint8_t(code))) *
                               double(folded_scale(f.scale[size_t(frag_scale(e, n, k, N, Kp, block))], block)) * two_f;
            ASSERT_EQ(got, want) << "block " << block << " e " << e << " n " << n << " k " << k << " scale code "
                                 << int(sc) << " e2m1 " << int(canon);
          }
        // The kernels' scale pick (the lane's 8 bytes of rows g, g+8 + frag_scale_select by its t)
        // finds the same byte as frag_scale for every row and k of every block: the lane that
        // holds (n, k) (frag_nibble's word) picks it for all four of its k-steps.
        const int sb = frag_scale_bytes(block);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < Kp; ++k) {
            const int64_t blk = frag_block_index(e, n, k, N, Kp);
            const int lane = int((frag_nibble(e, n, k, N, Kp).word - blk * kFragWords) / 4);
            const int g = lane / 4, t = lane % 4;
            ASSERT_EQ(g, int(n % 8));
            const uint8_t* ws = f.scale.data() + blk * sb + g * (sb / 8);
            int word, byte;
            frag_scale_select(t, block == 32, &word, &byte);
            const uint8_t picked = ws[word * 4 + byte + int((n % 16) / 8)];
            ASSERT_EQ(picked, f.scale[size_t(frag_scale(e, n, k, N, Kp, block))]) << "n " << n << " k " << k;
          }
      }
    }
  }
}

// An MXFP4 expert whose non-zero blocks span more than kMxMaxSpan binades cannot be folded:
// build_fragments refuses it naming the lowest such expert, whichever thread met it first
// (experts 1 and 4 of 6 here, so on more than one thread they fall in different slices).
TEST(CudaGemmLayout, FragmentsRefuseTheLowestUnfoldableExpert) {
  const int64_t E = 6;
  const int N = 16, K = 64, block = 32;
  detail::HostBytes data(size_t(E * N * K / 2), uint8_t(0x11)), scale(size_t(E * N * K / block), uint8_t(127));
  for (const int64_t bad : {int64_t(1), int64_t(4)}) scale[size_t(bad * N * K / block)] = uint8_t(127 + kMxMaxSpan + 1);
  const std::vector<float> dq(size_t(E), 1.0f);
  try {
    build_fragments("w", data, scale, dq, E, N, K, block, [](int64_t r, int64_t) { return r; });
    ADD_FAILURE() << "an unfoldable expert was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w_scale: e8m0 codes of expert 1 span"), std::string::npos) << e.what();
  }
}

// The k permutation inside a k-block (gemm_internal.hpp kperm_position): a bijection of 0..63
// with its inverse; logical k 16t + 4j + 2h + e sits where mma.m16n8k16's A fragment puts lane
// t's register a_{2h} (a_{2h+1}) of k-step j, element e (PTX ISA: k = 2t + 8h + e of the k-step),
// so lane t's words hold logical k 16t .. 16t + 15 only; pairs (e = 0, 1) stay side by side;
// kperm_index keeps the k-block and kperm_row rounds up to whole k-blocks.
TEST(CudaGemmLayout, KPermutationPutsALanesBlockInItsWords) {
  std::vector<int> seen(64, 0);
  for (int l = 0; l < 64; ++l) {
    const int p = kperm_position(l);
    ASSERT_TRUE(p >= 0 && p < 64) << l;
    ++seen[size_t(p)];
    ASSERT_EQ(kperm_logical(p), l);
    const int t = l / 16, j = (l / 4) % 4, h = (l / 2) % 2, e = l % 2;
    ASSERT_EQ(p, 16 * j + 2 * t + 8 * h + e) << l;  // k-step j, MMA k 2t + 8h + e
    if (e == 0) ASSERT_EQ(kperm_position(l + 1), p + 1);
  }
  for (int p = 0; p < 64; ++p) ASSERT_EQ(seen[size_t(p)], 1) << p;
  for (int64_t k : {int64_t(0), int64_t(63), int64_t(64), int64_t(130), int64_t(7167)})
    ASSERT_EQ(kperm_index(k), k / 64 * 64 + kperm_position(int(k % 64))) << k;
  EXPECT_EQ(kperm_row(64), 64);
  EXPECT_EQ(kperm_row(80), 128);
  EXPECT_EQ(kperm_row(2880), 2880);
  // Every nibble of a lane's four words (frag_nibble) is logical k 16t .. 16t + 15 of rows g, g+8.
  for (int n = 0; n < 16; ++n)
    for (int k = 0; k < 64; ++k) {
      const NibbleAt at = frag_nibble(0, n, k, 16, 64);
      const int lane = int(at.word / 4), kk = int(at.word % 4);
      ASSERT_EQ(lane / 4, n % 8);
      ASSERT_EQ(lane % 4, k / 16) << "n " << n << " k " << k;
      ASSERT_EQ(kk, (k / 4) % 4) << "n " << n << " k " << k;
    }
}

// The kernels' reading of the layout, emulated on the host: mma.m16n8k16 (PTX ISA fragments:
// A a0 / a1 rows g / g + 8 at k 2t, 2t + 1, a2 / a3 at k 2t + 8, 2t + 9; B b0 at k 2t, 2t + 1 and
// b1 at k 2t + 8, 2t + 9 of token g; C c0, c1 row g, c2, c3 row g + 8 at tokens 2t, 2t + 1) fed
// with each lane's words decoded by frag_decode_word times its one scale pair
// (frag_scale_select by t) and with B as the kernels read it: from logical rows (lane t's
// words 8t + 2kk + {0, 1} of a k-block, the mma.sync kernels' GEMM 1) and from k-permuted rows
// (words 8kk + 4h + t, kperm_index: GEMM 2 and the wgmma kernels), summed over the k-steps and
// k-blocks. Both equal the logical dot products of the checkpoint's weights and x, for NVFP4
// and MXFP4, K a whole number of k-blocks or not.
TEST(CudaGemmLayout, HostMmaOfTheLayoutMatchesTheDotProducts) {
  std::mt19937_64 rng(31);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const int block : {16, 32})
    for (const int K : {128, block == 16 ? 80 : 96, 192 + block}) {
      SCOPED_TRACE("block " + std::to_string(block) + " K " + std::to_string(K));
      const int N = 16, T = 8, Kp = (K + kFragK - 1) / kFragK * kFragK;
      detail::HostBytes data(size_t(N * K / 2)), scale(size_t(N * K / block));
      for (auto& b : data) b = uint8_t(rng());
      for (auto& c : scale) c = block == 32 ? uint8_t(120 + rng() % 12) : uint8_t(random_e4m3(rng) & 0x7E);
      const HostFragments f =
          build_fragments("w", data, scale, {1.0f}, 1, N, K, block, [](int64_t r, int64_t) { return r; });
      std::vector<uint16_t> x(size_t(T * K)), xp(size_t(T * kperm_row(K)), 0);
      for (auto& v : x) v = bf16_from_f32(nd(rng));
      for (int n = 0; n < T; ++n)
        for (int k = 0; k < K; ++k) xp[size_t(n * kperm_row(K) + kperm_index(k))] = x[size_t(n * K + k)];
      auto bf = [](uint32_t word, int half) { return double(bf16_to_f32(uint16_t(word >> (16 * half)))); };
      auto word_at = [](const std::vector<uint16_t>& row, int64_t w) {  // word w (two bf16) of a row, 0 past it
        return 2 * w + 1 < int64_t(row.size()) ? uint32_t(row[size_t(2 * w)]) | uint32_t(row[size_t(2 * w + 1)]) << 16
                                               : 0u;
      };
      const int sb = frag_scale_bytes(block);
      for (const bool kperm : {false, true}) {
        double c[16][8] = {};
        for (int kb = 0; kb < Kp / kFragK; ++kb) {
          const int64_t blk = frag_block_index(0, 0, int64_t(kb) * kFragK, N, Kp);
          for (int kk = 0; kk < 4; ++kk) {
            double A[16][16] = {}, B[16][8] = {};
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane / 4, t = lane % 4;
              uint32_t a[4];
              frag_decode_word(f.q[size_t(blk * kFragWords + lane * 4 + kk)], a);  // the word as in memory
              int word, byte;
              frag_scale_select(t, block == 32, &word, &byte);
              const uint8_t* ws = f.scale.data() + blk * sb + g * (sb / 8) + word * 4;
              const double s_lo = double(folded_scale(ws[byte], block)), s_hi = double(folded_scale(ws[byte + 1], block));
              for (int e = 0; e < 2; ++e) {
                // decoded values are e2m1 * 2^-126; folded_scale is |scale| * 2^-F: the product
                // the kernels form, up to the 2^-126 the bf16 S carries
                const double k2 = std::ldexp(1.0, 126);
                A[g][2 * t + e] = bf(a[0], e) * k2 * s_lo;
                A[g + 8][2 * t + e] = bf(a[1], e) * k2 * s_hi;
                A[g][2 * t + 8 + e] = bf(a[2], e) * k2 * s_lo;
                A[g + 8][2 * t + 8 + e] = bf(a[3], e) * k2 * s_hi;
              }
              // B of token g: logical rows (K long) or k-permuted (Kp long, zeros past K)
              uint32_t b0, b1;
              if (!kperm) {
                const std::vector<uint16_t> row(x.begin() + g * K, x.begin() + (g + 1) * K);
                const int64_t w0 = int64_t(kb) * 32 + 8 * t + 2 * kk;
                const bool on = kb * kFragK + 16 * t < K;
                b0 = on ? word_at(row, w0) : 0u;
                b1 = on ? word_at(row, w0 + 1) : 0u;
              } else {
                const std::vector<uint16_t> row(xp.begin() + g * kperm_row(K), xp.begin() + (g + 1) * kperm_row(K));
                b0 = word_at(row, int64_t(kb) * 32 + 8 * kk + t);
                b1 = word_at(row, int64_t(kb) * 32 + 8 * kk + 4 + t);
              }
              for (int e = 0; e < 2; ++e) {
                B[2 * t + e][g] = bf(b0, e);
                B[2 * t + 8 + e][g] = bf(b1, e);
              }
            }
            for (int r = 0; r < 16; ++r)
              for (int n = 0; n < 8; ++n)
                for (int k = 0; k < 16; ++k) c[r][n] += A[r][k] * B[k][n];
          }
        }
        const double two_f = double(f.epi[0]);
        for (int r = 0; r < 16; ++r)
          for (int n = 0; n < T; ++n) {
            double want = 0.0, mag = 0.0;
            for (int k = 0; k < K; ++k) {
              const uint8_t byte = data[size_t(r * (K / 2) + k / 2)];
              const uint8_t sc = scale[size_t(r * (K / block) + k / block)];
              const double w = double(e2m1_to_f32((k & 1) ? byte >> 4 : byte & 15)) *
                               (block == 16 ? double(e4m3_to_f32(sc)) : std::ldexp(1.0, int(sc) - 127));
              want += w * double(bf16_to_f32(x[size_t(n * K + k)]));
              mag += std::fabs(w * double(bf16_to_f32(x[size_t(n * K + k)])));
            }
            ASSERT_NEAR(c[r][n] * two_f, want, 1e-12 * mag + 1e-30)
                << (kperm ? "k-permuted" : "logical") << " B, row " << r << " token " << n;
          }
      }
    }
}

// Layout index functions: every (row, k) of a block has its own nibble, scale indices
// stay inside the block's scale bytes; the blocks of a last group's rows past N hold no
// nibble; frag_block numbers (fragment row, k-block) of every group of every expert apart,
// a row's next k-block kFragGroup blocks on.
TEST(CudaGemmLayout, NibblesAreABijection) {
  for (int N : {16, 48, 128, 144}) {
    const int Kp = 128, KB = Kp / kFragK, NG = frag_groups(N);
    ASSERT_EQ(NG, (N / kFragRows + kFragGroup - 1) / kFragGroup);
    std::vector<uint32_t> seen(size_t(frag_expert_blocks(N, Kp)) * kFragWords, 0);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < Kp; ++k) {
        const NibbleAt at = frag_nibble(0, n, k, N, Kp);
        ASSERT_LT(at.word, int64_t(seen.size()));
        ASSERT_TRUE(at.shift >= 0 && at.shift <= 28 && at.shift % 4 == 0);
        ASSERT_EQ(seen[size_t(at.word)] & (15u << at.shift), 0u) << "n " << n << " k " << k;
        seen[size_t(at.word)] |= 15u << at.shift;
        for (int block : {16, 32}) {
          const int64_t s = frag_scale(0, n, k, N, Kp, block);
          const int64_t blk = frag_block_index(0, n, k, N, Kp);
          ASSERT_GE(s, blk * frag_scale_bytes(block));
          ASSERT_LT(s, (blk + 1) * frag_scale_bytes(block));
        }
      }
    for (int nb = 0; nb < NG * kFragGroup; ++nb)
      for (int kb = 0; kb < KB; ++kb)
        for (int i = 0; i < kFragWords; ++i)
          ASSERT_EQ(seen[size_t(frag_block(0, nb, kb, NG, KB) * kFragWords + i)], nb < N / kFragRows ? 0xFFFFFFFFu : 0u)
              << "N " << N << " fragment row " << nb << " k-block " << kb;
    std::vector<int> hits(size_t(3 * frag_expert_blocks(N, Kp)), 0);
    for (int e = 0; e < 3; ++e)
      for (int nb = 0; nb < NG * kFragGroup; ++nb)
        for (int kb = 0; kb < KB; ++kb) {
          const int64_t b = frag_block(e, nb, kb, NG, KB);
          ASSERT_TRUE(b >= 0 && b < int64_t(hits.size()));
          ++hits[size_t(b)];
          if (kb + 1 < KB) ASSERT_EQ(frag_block(e, nb, kb + 1, NG, KB), b + kFragGroup);
          if (nb % kFragGroup + 1 < kFragGroup) ASSERT_EQ(frag_block(e, nb + 1, kb, NG, KB), b + 1);
        }
    for (int h : hits) ASSERT_EQ(h, 1);
  }
  // gate and up of one i share a 16-row tile, 8 rows apart
  for (int i = 0; i < 64; ++i) EXPECT_EQ(w13_device_row(i, true) - w13_device_row(i, false), 8);
}

// The kernels' slot search (find_slot: counts loaded 8 experts, or 1 (the wgmma kernels'), per
// lane at a time, the lanes' sums scanned, the hit lane walking its experts) against the plain
// walk over experts, for every slot and a few past the last, at expert counts around its steps of
// 32 x 8 and 32, with idle experts among busy ones, in every span (the split's wide and narrow
// launches, and a folding cut).
TEST(CudaGemmLayout, FindSlotMatchesTheWalkOverExperts) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(20261202);
  struct SpanCase {
    TileSpan span;
    SpanCut cut;
  };
  const SpanCase spans[] = {{TileSpan::all, SpanCut{}},
                            {TileSpan::wide, SpanCut{kSplitWideTile, kSplitNarrowTile, 0}},
                            {TileSpan::narrow, SpanCut{kSplitWideTile, 16, 0}},
                            {TileSpan::narrow, SpanCut{kSplitWideTile, kSplitNarrowTile, 16}},
                            {TileSpan::narrow, SpanCut{64, 16, 0, 3}}};
  int checked = 0;
  for (int64_t E : {1, 7, 31, 32, 33, 255, 256, 257, 384, 511, 513, 700}) {
    for (double idle : {0.0, 0.5, 0.97}) {
      std::vector<int32_t> count(static_cast<size_t>(E));
      std::uniform_real_distribution<double> u(0.0, 1.0);
      std::uniform_int_distribution<int> rows(1, 300);
      for (auto& c : count) c = u(rng) < idle ? 0 : rows(rng);
      if (E > 2) count[1] = -3;  // a negative count is no rows
      testing::DeviceBuffer d_count(count);
      for (int tok : {8, 64}) {
        for (const SpanCase& sc : spans) {
          std::vector<int32_t> want_e, want_t;  // the walk: expert after expert, its tiles in order
          for (int64_t e = 0; e < E; ++e)
            for (int t = 0; t < span_tiles(std::max(count[size_t(e)], 0), tok, sc.span, sc.cut); ++t)
              want_e.push_back(int32_t(e)), want_t.push_back(t);
          const int64_t slots = int64_t(want_e.size()) + 3;
          for (int per : {8, 1}) {
            testing::DeviceBuffer d_e(size_t(slots) * 4), d_t(size_t(slots) * 4);
            find_slots_for_test(d_count.as<int32_t>(), E, tok, per, sc.span, sc.cut, slots, d_e.as<int32_t>(),
                                d_t.as<int32_t>(), nullptr);
            ck(cudaGetLastError(), "find_slots_for_test");
            const auto got_e = d_e.download<int32_t>(), got_t = d_t.download<int32_t>();
            for (int64_t s = 0; s < slots; ++s) {
              const bool real = s < int64_t(want_e.size());
              ASSERT_EQ(got_e[size_t(s)], real ? want_e[size_t(s)] : -1)
                  << "E " << E << " idle " << idle << " tok " << tok << " per " << per << " span " << int(sc.span)
                  << " slot " << s;
              if (real)
                ASSERT_EQ(got_t[size_t(s)], want_t[size_t(s)])
                    << "E " << E << " tok " << tok << " per " << per << " slot " << s;
            }
            checked += int(slots);
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 200000);
}

}  // namespace
}  // namespace fp4moe::cuda
