// The reference MoE layer (SPEC §4) and the "reference" backend that serves it.
//
// One token, one expert slot, one output element at a time, straight from the FP4 codes:
// no permutation, no tiling, no layout other than the canonical one of HostWeights.
//
// Dot products multiply exactly dequantized fp32 weights by fp32 activations and sum in
// double. Every fp32 product is exact in double and the sum keeps ~29 spare bits, so the
// fp32 result is the exact dot product rounded once: the oracle does not depend on a
// summation order, and no backend is favoured by sharing its order.
#include <algorithm>
#include <cmath>
#include <memory>

#include "format/quant.hpp"
#include "fp4moe/format.h"
#include "reference/reference.hpp"

namespace fp4moe::detail {
namespace {

// e2m1 code -> value, from the format header once.
struct E2m1Table {
  float v[16];
  E2m1Table() {
    for (int c = 0; c < 16; ++c) v[c] = e2m1_to_f32(uint8_t(c));
  }
};
const E2m1Table kE2m1;

// One FP4 weight matrix of one expert: data (rows, K/2) u8, scale (rows, K/block).
struct Fp4Matrix {
  const uint8_t* data;
  const uint8_t* scale;
  float dq;      // weight dq_scale (1 for MXFP4)
  int block;     // 16: e4m3 scales, 32: e8m0 scales
  int64_t K;

  // sum_k W[row, k] * a[k], W[row, k] = (e2m1 * block scale) * dq in fp32 (SPEC §2).
  float dot(int64_t row, const float* a) const {
    const uint8_t* q = data + row * (K / 2);
    const uint8_t* s = scale + row * (K / block);
    double acc = 0.0;
    for (int64_t b = 0; b < K / block; ++b) {
      const float sc = block == kNvfp4Block ? e4m3_to_f32(s[b]) : e8m0_to_f32(s[b]);
      for (int64_t k = b * block; k < (b + 1) * block; k += 2) {
        const uint8_t byte = q[k / 2];
        const float w0 = (kE2m1.v[unpack_e2m1(byte, 0)] * sc) * dq;
        const float w1 = (kE2m1.v[unpack_e2m1(byte, 1)] * sc) * dq;
        acc += double(w0) * double(a[k]) + double(w1) * double(a[k + 1]);
      }
    }
    return float(acc);
  }
};

float activation(const LayerDesc& d, float g, float u) {
  if (d.activation == Activation::silu) return g / (1.0f + std::exp(-g)) * u;
  // swiglu_oai (gpt-oss): gate clamped above, up clamped both ways, up shifted by 1
  g = std::min(g, d.swiglu_limit);
  u = std::clamp(u, -d.swiglu_limit, d.swiglu_limit);
  return (u + 1.0f) * g * (1.0f / (1.0f + std::exp(-d.swiglu_alpha * g)));
}

// Scratch (floats): x (H) | a (H) | h (I) | y (H) | acc (H)
struct Scratch {
  float *x, *a, *h, *y, *acc;
  Scratch(float* p, int64_t H, int64_t I) : x(p), a(p + H), h(p + 2 * H), y(p + 2 * H + I), acc(p + 3 * H + I) {}
};

// a (H) -> y (H) through local expert e: GEMM 1, activation, bf16 (and W4A4 NVFP4)
// round trip of h, GEMM 2, biases where given.
void expert(const HostWeights& w, int64_t e, const float* a, float* h, float* y) {
  const int64_t H = w.H(), I = w.I();
  const Fp4Matrix w13{w.w13.data() + e * 2 * I * (H / 2), w.w13_scale.data() + e * 2 * I * (H / w.block),
                      w.w13_dq[e], w.block, H};
  const Fp4Matrix w2{w.w2.data() + e * H * (I / 2), w.w2_scale.data() + e * H * (I / w.block), w.w2_dq[e],
                     w.block, I};
  const float* b13 = w.w13_bias.empty() ? nullptr : w.w13_bias.data() + e * 2 * I;  // (2I) gate | up
  const float* b2 = w.w2_bias.empty() ? nullptr : w.w2_bias.data() + e * H;          // (H)
  for (int64_t i = 0; i < I; ++i) {
    float g = w13.dot(i, a), u = w13.dot(I + i, a);
    if (b13) {
      g += b13[i];
      u += b13[I + i];
    }
    h[i] = round_bf16(activation(w.desc, g, u));
  }
  if (w.desc.act_quant == ActQuant::nvfp4) nvfp4_fake_quant(h, I, 1.0f / w.a2_dq, w.a2_dq, h);
  for (int64_t o = 0; o < H; ++o) y[o] = w2.dot(o, h) + (b2 ? b2[o] : 0.0f);
}

// x (H) bf16-valued -> a (H): the GEMM 1 input, NVFP4 round trip under W4A4.
void quant_in(const HostWeights& w, const float* x, float* a) {
  if (w.desc.act_quant == ActQuant::nvfp4) nvfp4_fake_quant(x, w.H(), 1.0f / w.a13_dq, w.a13_dq, a);
  else std::copy(x, x + w.H(), a);
}

int32_t local_expert(const HostWeights& w, int32_t id) {
  if (id < 0) return -1;
  return w.expert_map.empty() ? id : w.expert_map[id];
}

}  // namespace

size_t reference_scratch_floats(const HostWeights& w) { return size_t(4 * w.H() + w.I()); }

void reference_forward(const HostWeights& w, const ForwardArgs& args, float* scratch) {
  const TensorView &X = args.hidden_states, &W = args.topk_weights, &ID = args.topk_ids, &O = args.out;
  const int64_t T = X.shape[0], H = w.H(), k = ID.shape[1];
  Scratch s(scratch, H, w.I());
  for (int64_t t = 0; t < T; ++t) {
    std::fill(s.acc, s.acc + H, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = local_expert(w, static_cast<const int32_t*>(ID.data)[t * ID.stride[0] + j * ID.stride[1]]);
      if (e < 0) continue;  // no expert, or not on this rank: contributes exactly 0
      float wj = static_cast<const float*>(W.data)[t * W.stride[0] + j * W.stride[1]];
      for (int64_t i = 0; i < H; ++i) s.x[i] = round_bf16(read_activation(X.data, X.dtype, t * X.stride[0] + i * X.stride[1]));
      if (args.apply_router_weight_on_input) {
        for (int64_t i = 0; i < H; ++i) s.x[i] = round_bf16(s.x[i] * wj);
        wj = 1.0f;
      }
      quant_in(w, s.x, s.a);
      expert(w, e, s.a, s.h, s.y);
      for (int64_t i = 0; i < H; ++i) s.acc[i] += wj * s.y[i];
    }
    for (int64_t i = 0; i < H; ++i) {
      const int64_t at = t * O.stride[0] + i * O.stride[1];
      const float v = args.accumulate ? read_activation(O.data, O.dtype, at) + s.acc[i] : s.acc[i];
      write_activation(O.data, O.dtype, at, v);
    }
  }
}

void reference_forward_batched(const HostWeights& w, const BatchedArgs& args, float* scratch) {
  const TensorView &X = args.hidden_states, &N = args.expert_num_tokens, &O = args.out;
  const int64_t H = w.H();
  Scratch s(scratch, H, w.I());
  for (int64_t e = 0; e < X.shape[0]; ++e) {
    const int32_t count = static_cast<const int32_t*>(N.data)[e * N.stride[0]];
    for (int64_t r = 0; r < count; ++r) {
      if (X.dtype == DType::u8) {
        // already NVFP4 (W4A4 dispatch quantized it): dequantize, no second round trip.
        // data row (H/2) u8, scale row (H/16) e4m3, both contiguous along H.
        const TensorView& S = args.hidden_scale;
        nvfp4_dequantize_rows(static_cast<const uint8_t*>(X.data) + e * X.stride[0] + r * X.stride[1],
                              static_cast<const uint8_t*>(S.data) + e * S.stride[0] + r * S.stride[1], 1, H,
                              w.a13_dq, s.a);
      } else {
        for (int64_t i = 0; i < H; ++i)
          s.x[i] = round_bf16(read_activation(X.data, X.dtype, e * X.stride[0] + r * X.stride[1] + i * X.stride[2]));
        quant_in(w, s.x, s.a);
      }
      expert(w, e, s.a, s.h, s.y);
      for (int64_t i = 0; i < H; ++i)
        write_activation(O.data, O.dtype, e * O.stride[0] + r * O.stride[1] + i * O.stride[2], s.y[i]);
    }
  }
}

// ---------------------------------------------------------------------------
// The backend
// ---------------------------------------------------------------------------
namespace {

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(std::shared_ptr<const HostWeights> w) : w_(std::move(w)) {
    desc = w_->desc;
    num_local = w_->num_local;
    name = "reference";
    device = DeviceType::cpu;
  }
  // The caller's u8 workspace may start at any byte: room to align the floats up.
  size_t workspace_size(int64_t) const override { return reference_scratch_floats(*w_) * sizeof(float) + kAlign; }
  size_t batched_workspace_size(int64_t) const override { return workspace_size(0); }
  void forward(const ForwardArgs& args) const override { reference_forward(*w_, args, scratch(args.workspace)); }
  void forward_batched(const BatchedArgs& args) const override {
    reference_forward_batched(*w_, args, scratch(args.workspace));
  }

 private:
  static constexpr size_t kAlign = 64;
  static float* scratch(const TensorView& ws) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ws.data);
    return reinterpret_cast<float*>((p + kAlign - 1) / kAlign * kAlign);
  }
  std::shared_ptr<const HostWeights> w_;
};

std::unique_ptr<Backend> create_reference(std::shared_ptr<const HostWeights> w, const PrepareOptions&) {
  if (w->codes != CodeLayout::canonical) fail(ErrorKind::unsupported, "backend reference: codes not canonical");
  return std::make_unique<ReferenceBackend>(std::move(w));
}

}  // namespace

BackendEntry reference_backend_entry() {
  return BackendEntry{
      "reference",
      DeviceType::cpu,
      [] { return std::string(); },
      [](const LayerDesc&) { return std::string(); },
      "the scalar oracle: always available, slowest",
      create_reference,
  };
}

}  // namespace fp4moe::detail
