#include "prepare/prepare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "api/validate.hpp"
#include "fp4moe/format.h"
#include "parallel.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include "cuda/common/check.hpp"
#include "cuda/common/device.hpp"
#endif

namespace fp4moe::detail {
namespace {

constexpr const char* kEntry = "Layer::prepare";
// Upper bounds that keep every byte count of a layer far from int64 overflow.
constexpr int64_t kMaxHidden = int64_t(1) << 20;
constexpr int64_t kMaxExperts = int64_t(1) << 16;

std::string hex(uint8_t code) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%02X", code);
  return s;
}

std::string num(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}

// Copies `height` rows of `width` bytes from t's memory (starting `src_offset` bytes
// in, rows `src_pitch` apart) to dst (rows `dst_pitch` apart). Both sides are
// validated contiguous tensors, so every row lies inside them.
void copy_rows(const TensorView& t, size_t src_offset, size_t src_pitch, uint8_t* dst, size_t dst_pitch,
               size_t width, size_t height) {
  if (width == 0 || height == 0) return;
  const auto* src = static_cast<const uint8_t*>(t.data) + src_offset;
  if (t.device == DeviceType::cpu) {
    parallel_copy_rows(dst, dst_pitch, src, src_pitch, width, height);
    return;
  }
#if defined(FP4MOE_WITH_CUDA)
  FP4MOE_CUDA_CHECK(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDefault));
#else
  fail(ErrorKind::unsupported, "Layer::prepare: CUDA tensor in a build without CUDA");  // rejected earlier
#endif
}

std::vector<uint8_t> fetch_bytes(const TensorView& t) {
  std::vector<uint8_t> v(t.nbytes());
  copy_rows(t, 0, v.size(), v.data(), v.size(), v.size(), 1);
  return v;
}

std::vector<float> fetch_f32(const TensorView& t) {
  std::vector<float> v(size_t(t.numel()));
  copy_rows(t, 0, t.nbytes(), reinterpret_cast<uint8_t*>(v.data()), t.nbytes(), t.nbytes(), 1);
  return v;
}

// Per-expert fp32 scales (scale_2, input scales): finite and > 0.
std::vector<float> fetch_positive(const char* arg, const TensorView& t) {
  std::vector<float> v = fetch_f32(t);
  for (size_t i = 0; i < v.size(); ++i)
    if (!(std::isfinite(v[i]) && v[i] > 0.0f))
      fail_got(kEntry, arg, num(v[i]) + " at [" + std::to_string(i) + "]", "finite values > 0");
  return v;
}

// The (E_local, 2I, row_bytes) tensor t into dst in concat order. Interleaved rows
// (2i gate_i, 2i+1 up_i) become gate rows [0, I) and up rows [I, 2I).
void fetch_w13(const TensorView& t, int64_t E, int64_t I, size_t row_bytes, bool interleaved, uint8_t* dst) {
  const size_t expert_bytes = size_t(2 * I) * row_bytes;
  if (!interleaved) {
    copy_rows(t, 0, expert_bytes * size_t(E), dst, expert_bytes * size_t(E), expert_bytes * size_t(E), 1);
    return;
  }
  auto expert = [&](int64_t e, int) {
    const size_t base = size_t(e) * expert_bytes;
    copy_rows(t, base, 2 * row_bytes, dst + base, row_bytes, row_bytes, size_t(I));
    copy_rows(t, base + row_bytes, 2 * row_bytes, dst + base + size_t(I) * row_bytes, row_bytes, row_bytes,
              size_t(I));
  };
  // host tensors: experts in parallel (each copy alone is small); device tensors (their copies
  // can throw): one after another
  const bool serial = t.device != DeviceType::cpu || expert_bytes * size_t(E) < kParallelCopyMin;
  parallel_for(E, serial ? 1 : host_threads(), expert);
}

// First NaN scale code in checkpoint order. scales: (E, R, C) canonical; canonical_row
// maps a checkpoint row to the row that holds it now.
template <class RowMap>
void check_scale_codes(const char* arg, const HostBytes& scales, int64_t E, int64_t R, int64_t C,
                       WeightFormat fmt, RowMap canonical_row) {
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < R; ++r) {
      const uint8_t* row = scales.data() + (e * R + canonical_row(r)) * C;
      for (int64_t c = 0; c < C; ++c) {
        const uint8_t code = row[c];
        const bool nan = fmt == WeightFormat::nvfp4 ? (code & 0x7F) == 0x7F : code == 0xFF;
        if (nan)
          fail_got(kEntry, arg,
                   "NaN code " + hex(code) + " at [" + std::to_string(e) + ", " + std::to_string(r) + ", " +
                       std::to_string(c) + "]",
                   fmt == WeightFormat::nvfp4 ? "finite e4m3 block scales (0x7F/0xFF are NaN)"
                                              : "finite e8m0 block scales (0xFF is NaN)");
      }
    }
}

// (E, N) bf16|f32 bias -> fp32 in concat order (w13 biases may be interleaved).
std::vector<float> fetch_bias(const char* arg, const TensorView& t, int64_t E, int64_t N, int64_t I,
                              bool interleaved) {
  const std::vector<uint8_t> raw = fetch_bytes(t);
  std::vector<float> out(size_t(E * N));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t j = 0; j < N; ++j) {  // j: checkpoint column
      const int64_t i = e * N + j;
      float v;
      if (t.dtype == DType::f32) {
        std::memcpy(&v, raw.data() + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        v = bf16_to_f32(h);
      }
      if (!std::isfinite(v))
        fail_got(kEntry, arg, num(v) + " at [" + std::to_string(e) + ", " + std::to_string(j) + "]",
                 "finite values");
      const int64_t c = interleaved ? (j % 2 == 0 ? j / 2 : I + j / 2) : j;
      out[size_t(e * N + c)] = v;
    }
  return out;
}

}  // namespace

int weight_block(WeightFormat format) { return format == WeightFormat::mxfp4 ? kMxfp4Block : kNvfp4Block; }

void validate_desc(std::string_view entry, const LayerDesc& d) {
  if (d.weight_format != WeightFormat::nvfp4 && d.weight_format != WeightFormat::mxfp4)
    fail_got(entry, "desc.weight_format", std::to_string(int(d.weight_format)), "nvfp4 or mxfp4");
  if (d.act_quant != ActQuant::none && d.act_quant != ActQuant::nvfp4)
    fail_got(entry, "desc.act_quant", std::to_string(int(d.act_quant)), "none or nvfp4");
  if (d.activation != Activation::silu && d.activation != Activation::swiglu_oai)
    fail_got(entry, "desc.activation", std::to_string(int(d.activation)), "silu or swiglu_oai");
  if (d.gate_up != GateUpLayout::concat && d.gate_up != GateUpLayout::interleaved)
    fail_got(entry, "desc.gate_up", std::to_string(int(d.gate_up)), "concat or interleaved");

  const int64_t block = weight_block(d.weight_format);
  const std::string fmt = to_string(d.weight_format);
  if (d.hidden <= 0 || d.hidden > kMaxHidden || d.hidden % block != 0)
    fail_got(entry, "desc.hidden", std::to_string(d.hidden),
             "a positive multiple of " + std::to_string(block) + " (the " + fmt + " block) up to " +
                 std::to_string(kMaxHidden));
  if (d.intermediate <= 0 || d.intermediate > kMaxHidden || d.intermediate % block != 0)
    fail_got(entry, "desc.intermediate", std::to_string(d.intermediate),
             "a positive multiple of " + std::to_string(block) + " (the " + fmt + " block) up to " +
                 std::to_string(kMaxHidden));
  if (d.num_experts < 1 || d.num_experts > kMaxExperts)
    fail_got(entry, "desc.num_experts", std::to_string(d.num_experts),
             "a value in [1, " + std::to_string(kMaxExperts) + "]");
  if (d.top_k < 1 || d.top_k > d.num_experts)
    fail_got(entry, "desc.top_k", std::to_string(d.top_k),
             "a value in [1, num_experts = " + std::to_string(d.num_experts) + "]");
  if (d.act_quant == ActQuant::nvfp4 && d.weight_format != WeightFormat::nvfp4)
    fail_got(entry, "desc.act_quant", "nvfp4 with " + fmt + " weights", "none (W4A4 needs nvfp4 weights)");
  if (d.activation == Activation::swiglu_oai) {
    if (!std::isfinite(d.swiglu_alpha))
      fail_got(entry, "desc.swiglu_alpha", num(d.swiglu_alpha), "a finite value");
    if (!(std::isfinite(d.swiglu_limit) && d.swiglu_limit > 0.0f))
      fail_got(entry, "desc.swiglu_limit", num(d.swiglu_limit), "a finite value > 0");
  }
  expect_routing(entry, "desc.routing", d.routing, d.num_experts, d.top_k);
}

std::shared_ptr<HostWeights> prepare_host_weights(const LayerDesc& desc, const CheckpointWeights& w) {
  validate_desc(kEntry, desc);
  const bool nv = desc.weight_format == WeightFormat::nvfp4;
  const bool w4a4 = desc.act_quant == ActQuant::nvfp4;
  const bool interleaved = desc.gate_up == GateUpLayout::interleaved;
  const int64_t H = desc.hidden, I = desc.intermediate, E = desc.num_experts;
  const int64_t block = weight_block(desc.weight_format);
  const Place any = Place::anywhere();

  // E_local comes from w13; all other tensors are checked against it.
  const bool has_map = w.expert_map.present();
  expect_present(kEntry, "w13", w.w13, spec_string({DType::u8}, {E, 2 * I, H / 2}, any));
  const int64_t EL = w.w13.ndim == 3 ? w.w13.shape[0] : E;
  if (has_map ? (EL < 1 || EL > E) : EL != E)
    fail_tensor(kEntry, "w13", w.w13,
                spec_string({DType::u8}, {has_map ? kAnyExtent : E, 2 * I, H / 2}, any) +
                    (has_map ? " with 1 to num_experts experts"
                             : " (E_local = num_experts = " + std::to_string(E) + " without expert_map)"));

  const std::vector<DType> scale_types = {nv ? DType::e4m3 : DType::e8m0, DType::u8};
  expect_tensor(kEntry, "w13", w.w13, DType::u8, {EL, 2 * I, H / 2}, any);
  expect_tensor(kEntry, "w13_scale", w.w13_scale, scale_types, {EL, 2 * I, H / block}, any);
  expect_tensor(kEntry, "w2", w.w2, DType::u8, {EL, H, I / 2}, any);
  expect_tensor(kEntry, "w2_scale", w.w2_scale, scale_types, {EL, H, I / block}, any);
  if (nv) {
    expect_tensor(kEntry, "w13_scale_2", w.w13_scale_2, DType::f32, {EL}, any);
    expect_tensor(kEntry, "w2_scale_2", w.w2_scale_2, DType::f32, {EL}, any);
    if (w4a4) {
      expect_tensor(kEntry, "w13_input_scale", w.w13_input_scale, DType::f32, {EL}, any);
      expect_tensor(kEntry, "w2_input_scale", w.w2_input_scale, DType::f32, {EL}, any);
    } else {  // a W4A4 checkpoint run as W4A16: its input scales are checked, then unused
      expect_optional(kEntry, "w13_input_scale", w.w13_input_scale, {DType::f32}, {EL}, any);
      expect_optional(kEntry, "w2_input_scale", w.w2_input_scale, {DType::f32}, {EL}, any);
    }
  } else {
    expect_absent(kEntry, "w13_scale_2", w.w13_scale_2, "MXFP4 has no global scale");
    expect_absent(kEntry, "w2_scale_2", w.w2_scale_2, "MXFP4 has no global scale");
    expect_absent(kEntry, "w13_input_scale", w.w13_input_scale, "MXFP4 layers do not quantize activations");
    expect_absent(kEntry, "w2_input_scale", w.w2_input_scale, "MXFP4 layers do not quantize activations");
  }
  expect_optional(kEntry, "w13_bias", w.w13_bias, {DType::bf16, DType::f32}, {EL, 2 * I}, any);
  expect_optional(kEntry, "w2_bias", w.w2_bias, {DType::bf16, DType::f32}, {EL, H}, any);
  expect_optional(kEntry, "expert_map", w.expert_map, {DType::i32}, {E}, any);

  const std::pair<const char*, const TensorView*> all[] = {
      {"w13", &w.w13},           {"w13_scale", &w.w13_scale},           {"w13_scale_2", &w.w13_scale_2},
      {"w2", &w.w2},             {"w2_scale", &w.w2_scale},             {"w2_scale_2", &w.w2_scale_2},
      {"w13_bias", &w.w13_bias}, {"w13_input_scale", &w.w13_input_scale}, {"w2_input_scale", &w.w2_input_scale},
      {"w2_bias", &w.w2_bias},   {"expert_map", &w.expert_map}};
#if !defined(FP4MOE_WITH_CUDA)
  for (const auto& [arg, t] : all)
    if (t->present() && t->device == DeviceType::cuda)
      fail_tensor(kEntry, arg, *t, "a CPU tensor (this build has no CUDA)", ErrorKind::unsupported);
#else
  // A CUDA tensor's device must exist and its pointer be that device's memory: copy_rows reads
  // it with cudaMemcpy2D, whose error named no argument (v65's random mutations: a CPU buffer
  // labelled cuda:1 on a machine without one).
  int devices = -1;  // asked once a CUDA tensor is there: an all-host prepare starts no CUDA runtime
  for (const auto& [arg, t] : all) {
    if (!t->present() || t->device != DeviceType::cuda) continue;
    if (devices < 0) devices = cuda::device_count();
    if (t->device_id < 0 || t->device_id >= devices)
      fail_tensor(kEntry, arg, *t,
                  "a CPU tensor or one on a present CUDA device (" + std::to_string(devices) + " here)");
    if (t->numel() > 0) expect_device_memory(kEntry, arg, *t);
  }
#endif

  auto hw = std::make_shared<HostWeights>();
  hw->desc = desc;
  hw->desc.gate_up = GateUpLayout::concat;
  hw->num_local = EL;
  hw->block = int(block);

  // Small tensors first: their value checks fail before the large copies.
  if (has_map) {
    std::vector<uint8_t> raw = fetch_bytes(w.expert_map);
    hw->expert_map.resize(size_t(E));
    std::memcpy(hw->expert_map.data(), raw.data(), raw.size());
    std::vector<int64_t> seen(size_t(EL), -1);  // global index that maps to each local one
    for (int64_t g = 0; g < E; ++g) {
      const int32_t l = hw->expert_map[size_t(g)];
      const std::string at = " at [" + std::to_string(g) + "]";
      if (l < -1 || l >= EL)
        fail_got(kEntry, "expert_map", std::to_string(l) + at,
                 "-1 or a local index in [0, " + std::to_string(EL) + ")");
      if (l < 0) continue;
      if (seen[size_t(l)] >= 0)
        fail_got(kEntry, "expert_map",
                 "local index " + std::to_string(l) + " at [" + std::to_string(seen[size_t(l)]) + "] and" + at,
                 "each local index in [0, " + std::to_string(EL) + ") exactly once");
      seen[size_t(l)] = g;
    }
    for (int64_t l = 0; l < EL; ++l)
      if (seen[size_t(l)] < 0)
        fail_got(kEntry, "expert_map", "no global expert for local index " + std::to_string(l),
                 "each local index in [0, " + std::to_string(EL) + ") exactly once");
  } else {
    hw->expert_map.resize(size_t(E));
    for (int64_t g = 0; g < E; ++g) hw->expert_map[size_t(g)] = int32_t(g);
  }

  if (nv) {
    hw->w13_dq = fetch_positive("w13_scale_2", w.w13_scale_2);
    hw->w2_dq = fetch_positive("w2_scale_2", w.w2_scale_2);
  } else {
    hw->w13_dq.assign(size_t(EL), 1.0f);
    hw->w2_dq.assign(size_t(EL), 1.0f);
  }
  if (w4a4) {
    const std::vector<float> a13 = fetch_positive("w13_input_scale", w.w13_input_scale);
    const std::vector<float> a2 = fetch_positive("w2_input_scale", w.w2_input_scale);
    hw->a13_dq = *std::max_element(a13.begin(), a13.end());
    hw->a2_dq = *std::max_element(a2.begin(), a2.end());
  }
  if (w.w13_bias.present()) hw->w13_bias = fetch_bias("w13_bias", w.w13_bias, EL, 2 * I, I, interleaved);
  if (w.w2_bias.present()) hw->w2_bias = fetch_bias("w2_bias", w.w2_bias, EL, H, I, false);

  // Scales, then the packed weights (the bulk of the bytes).
  const int64_t C13 = H / block, C2 = I / block;
  hw->w13_scale.resize(size_t(EL * 2 * I * C13));
  fetch_w13(w.w13_scale, EL, I, size_t(C13), interleaved, hw->w13_scale.data());
  check_scale_codes("w13_scale", hw->w13_scale, EL, 2 * I, C13, desc.weight_format,
                    [&](int64_t r) { return interleaved ? (r % 2 == 0 ? r / 2 : I + r / 2) : r; });
  hw->w2_scale.resize(size_t(EL * H * C2));
  copy_rows(w.w2_scale, 0, hw->w2_scale.size(), hw->w2_scale.data(), hw->w2_scale.size(), hw->w2_scale.size(), 1);
  check_scale_codes("w2_scale", hw->w2_scale, EL, H, C2, desc.weight_format, [](int64_t r) { return r; });

  hw->w13.resize(size_t(EL * 2 * I * (H / 2)));
  fetch_w13(w.w13, EL, I, size_t(H / 2), interleaved, hw->w13.data());
  hw->w2.resize(size_t(EL * H * (I / 2)));
  copy_rows(w.w2, 0, hw->w2.size(), hw->w2.data(), hw->w2.size(), hw->w2.size(), 1);
  return hw;
}

}  // namespace fp4moe::detail
