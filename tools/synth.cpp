#include "synth.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "format/quant.hpp"
#include "fp4moe/format.h"

namespace fp4moe::cli {
namespace {

// Stream ids of stream_seed.
enum : uint64_t { kW13 = 1, kW13Scale, kW2, kW2Scale, kDq, kBias };

// NVFP4 block scales are drawn from the e4m3 codes of [96, 448]: ModelOpt scales blocks
// so that the tensor's largest block sits at 448 and typical blocks land a few binades
// below. 0x6C = 1.5 * 2^6 = 96, 0x7E = 448.
constexpr uint8_t kE4m3Lo = 0x6C, kE4m3Hi = 0x7E;
// MXFP4 block exponents spread over three binades around the target.
constexpr int kE8m0Spread = 1;

// RMS of e2m1 over uniformly random codes: mean of squares of 0..6 is 68.5 / 8.
const float kE2m1Rms = std::sqrt(68.5f / 8.0f);

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Target std of a dequantized weight: unit-variance outputs for unit-variance inputs
// (1/sqrt(K)), kept in the 0.02-0.05 band of trained MoE experts.
float target_std(int64_t K) { return std::clamp(1.0f / std::sqrt(float(K)), 0.02f, 0.05f); }

float e4m3_band_rms() {
  double s = 0;
  for (int c = kE4m3Lo; c <= kE4m3Hi; ++c) s += double(e4m3_to_f32(uint8_t(c))) * e4m3_to_f32(uint8_t(c));
  return float(std::sqrt(s / (kE4m3Hi - kE4m3Lo + 1)));
}

// Centre e8m0 code for a target std.
int e8m0_centre(float sigma) {
  const float spread_rms = std::sqrt((0.25f + 1.0f + 4.0f) / 3.0f);
  return 127 + int(std::lround(std::log2(sigma / (kE2m1Rms * spread_rms))));
}

void fill_codes(uint8_t* p, size_t n, Rng& rng) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(p + i, &r, 8);
  }
  if (i < n) {
    const uint64_t r = rng.next();
    std::memcpy(p + i, &r, n - i);
  }
}

void fill_scales(uint8_t* p, size_t n, WeightFormat f, int centre, Rng& rng) {
  if (f == WeightFormat::nvfp4) {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(kE4m3Lo + rng.below(kE4m3Hi - kE4m3Lo + 1));
  } else {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(centre - kE8m0Spread + int(rng.below(2 * kE8m0Spread + 1)));
  }
}

}  // namespace

float Rng::normal() {
  // Box-Muller; u1 in (0, 1] so the log is finite.
  const float u1 = 1.0f - uniform(), u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
}

uint64_t stream_seed(uint64_t seed, int64_t e, uint64_t what) {
  Rng r(seed ^ (uint64_t(e) * 0xD1B54A32D192ED03ull) ^ (what * 0x8CB92BA72F3D8DD7ull));
  return r.next();
}

size_t expert_weight_bytes(const LayerDesc& d, bool biases) {
  const int64_t H = d.hidden, I = d.intermediate;
  const int64_t block = d.weight_format == WeightFormat::mxfp4 ? kMxfp4Block : kNvfp4Block;
  size_t b = size_t(2 * I * H / 2 + 2 * I * H / block + H * I / 2 + H * I / block);
  if (d.weight_format == WeightFormat::nvfp4) b += 2 * sizeof(float);
  if (biases) b += size_t(2 * I + H) * 2;
  return b;
}

CheckpointWeights Synthetic::view() const {
  const int64_t E = int64_t(experts.size()), H = desc.hidden, I = desc.intermediate;
  const bool mx = desc.weight_format == WeightFormat::mxfp4;
  const int64_t block = mx ? kMxfp4Block : kNvfp4Block;
  const DType st = mx ? DType::e8m0 : DType::e4m3;
  CheckpointWeights w;
  w.w13 = TensorView::of(w13.data(), DType::u8, {E, 2 * I, H / 2});
  w.w13_scale = TensorView::of(w13_scale.data(), st, {E, 2 * I, H / block});
  w.w2 = TensorView::of(w2.data(), DType::u8, {E, H, I / 2});
  w.w2_scale = TensorView::of(w2_scale.data(), st, {E, H, I / block});
  if (!mx) {
    w.w13_scale_2 = TensorView::of(w13_scale_2.data(), DType::f32, {E});
    w.w2_scale_2 = TensorView::of(w2_scale_2.data(), DType::f32, {E});
  }
  if (desc.act_quant == ActQuant::nvfp4) {
    w.w13_input_scale = TensorView::of(w13_input_scale.data(), DType::f32, {E});
    w.w2_input_scale = TensorView::of(w2_input_scale.data(), DType::f32, {E});
  }
  if (!w13_bias.empty()) {
    w.w13_bias = TensorView::of(w13_bias.data(), DType::bf16, {E, 2 * I});
    w.w2_bias = TensorView::of(w2_bias.data(), DType::bf16, {E, H});
  }
  if (!expert_map.empty())
    w.expert_map = TensorView::of(expert_map.data(), DType::i32, {int64_t(expert_map.size())});
  return w;
}

Synthetic make_synthetic(const LayerDesc& d, uint64_t seed, const std::vector<int32_t>& experts,
                         const SynthOptions& opt) {
  Synthetic s;
  s.desc = d;
  if (experts.empty()) {
    s.experts.resize(size_t(d.num_experts));
    for (int64_t e = 0; e < d.num_experts; ++e) s.experts[size_t(e)] = int32_t(e);
  } else {
    s.experts = experts;
    s.expert_map.assign(size_t(d.num_experts), -1);
    for (size_t l = 0; l < experts.size(); ++l) s.expert_map[size_t(experts[l])] = int32_t(l);
  }
  const int64_t E = int64_t(s.experts.size()), H = d.hidden, I = d.intermediate;
  const bool mx = d.weight_format == WeightFormat::mxfp4;
  const int64_t block = mx ? kMxfp4Block : kNvfp4Block;
  const size_t n13 = size_t(2 * I * H / 2), n13s = size_t(2 * I * H / block);
  const size_t n2 = size_t(H * I / 2), n2s = size_t(H * I / block);
  s.w13.resize(E * n13);
  s.w13_scale.resize(E * n13s);
  s.w2.resize(E * n2);
  s.w2_scale.resize(E * n2s);
  s.w13_scale_2.resize(E);
  s.w2_scale_2.resize(E);
  s.w13_input_scale.assign(E, opt.a13_dq);
  s.w2_input_scale.assign(E, opt.a2_dq);
  if (opt.biases) {
    s.w13_bias.resize(size_t(E * 2 * I));
    s.w2_bias.resize(size_t(E * H));
  }

  const float sig13 = target_std(H), sig2 = target_std(I);
  const float band = e4m3_band_rms();
  const int c13 = e8m0_centre(sig13), c2 = e8m0_centre(sig2);

  auto one = [&](int64_t l) {
    const int64_t e = s.experts[size_t(l)];
    Rng r13(stream_seed(seed, e, kW13)), r13s(stream_seed(seed, e, kW13Scale));
    Rng r2(stream_seed(seed, e, kW2)), r2s(stream_seed(seed, e, kW2Scale)), rdq(stream_seed(seed, e, kDq));
    fill_codes(&s.w13[l * n13], n13, r13);
    fill_scales(&s.w13_scale[l * n13s], n13s, d.weight_format, c13, r13s);
    fill_codes(&s.w2[l * n2], n2, r2);
    fill_scales(&s.w2_scale[l * n2s], n2s, d.weight_format, c2, r2s);
    // Per-expert global scales vary by up to 25% either way, as calibrated ones do.
    s.w13_scale_2[l] = sig13 / (kE2m1Rms * band) * (0.8f + 0.45f * rdq.uniform());
    s.w2_scale_2[l] = sig2 / (kE2m1Rms * band) * (0.8f + 0.45f * rdq.uniform());
    if (opt.biases) {
      Rng rb(stream_seed(seed, e, kBias));
      for (int64_t i = 0; i < 2 * I; ++i) s.w13_bias[size_t(l * 2 * I + i)] = bf16_from_f32(0.1f * rb.normal());
      for (int64_t i = 0; i < H; ++i) s.w2_bias[size_t(l * H + i)] = bf16_from_f32(0.1f * rb.normal());
    }
  };

  const double per_expert_gb = double(expert_weight_bytes(d, opt.biases)) / 1e9;
  Progress progress("generating weights", per_expert_gb * double(E), "GB", opt.progress);
  std::atomic<int64_t> next{0}, done{0};
  const int n_threads = int(std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(E))));
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t)
    pool.emplace_back([&] {
      for (int64_t l; (l = next.fetch_add(1)) < E;) {
        one(l);
        done.fetch_add(1);
      }
    });
  while (done.load() < E) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    progress.update(per_expert_gb * double(done.load()));
  }
  for (auto& t : pool) t.join();
  progress.finish();
  return s;
}

float calibrate_a2_dq(const Synthetic& s, const std::vector<uint16_t>& x, int64_t tokens, int n_experts) {
  const LayerDesc& d = s.desc;
  const int64_t H = d.hidden, I = d.intermediate;
  n_experts = int(std::min<int64_t>(n_experts, int64_t(s.experts.size())));
  std::vector<float> xf(static_cast<size_t>(tokens * H)), row(static_cast<size_t>(H)), gu(static_cast<size_t>(tokens * 2 * I));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_f32(x[i]);
  float amax = 0.0f;
  for (int l = 0; l < n_experts; ++l) {
    for (int64_t r = 0; r < 2 * I; ++r) {
      detail::nvfp4_dequantize_rows(&s.w13[size_t((l * 2 * I + r) * H / 2)],
                                    &s.w13_scale[size_t((l * 2 * I + r) * H / kNvfp4Block)], 1, H,
                                    s.w13_scale_2[size_t(l)], row.data());
      for (int64_t t = 0; t < tokens; ++t) {
        float acc = 0.0f;
        for (int64_t k = 0; k < H; ++k) acc += xf[size_t(t * H + k)] * row[size_t(k)];
        gu[size_t(t * 2 * I + r)] = acc;
      }
    }
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < I; ++i) {
        // W4A4 is NVFP4 with silu and gate/up concatenated (SPEC §4)
        const float g = gu[size_t(t * 2 * I + i)], u = gu[size_t(t * 2 * I + I + i)];
        const float h = round_bf16(g / (1.0f + std::exp(-g)) * u);
        amax = std::max(amax, std::fabs(h));
      }
  }
  return amax > 0.0f ? 1.25f * amax / (kE2m1Max * kE4m3Max) : 1.0f;
}

Progress::Progress(std::string label, double total, const char* unit, bool enabled)
    : label_(std::move(label)), total_(total), unit_(unit), enabled_(enabled), start_(now_s()) {}

void Progress::update(double done) {
  if (!enabled_) return;
  const double t = now_s(), el = t - start_;
  if (el < 2.0 || t - last_ < 0.25) return;
  last_ = t;
  if (!shown_) std::fflush(stdout);
  shown_ = true;
  const double frac = total_ > 0 ? std::min(1.0, done / total_) : 1.0;
  const double eta = frac > 0 ? el * (1.0 - frac) / frac : 0.0;
  std::fprintf(stderr, "\r%s %3.0f%%  %.1f/%.1f %s  ETA %.0f s   ", label_.c_str(), 100.0 * frac, done, total_,
               unit_, eta);
  std::fflush(stderr);
}

void Progress::finish() {
  if (shown_) {
    std::fprintf(stderr, "\r%s 100%%  %.1f %s in %.1f s          \n", label_.c_str(), total_, unit_,
                 now_s() - start_);
    std::fflush(stderr);
  }
}

}  // namespace fp4moe::cli
