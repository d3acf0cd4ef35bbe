// fp4moe run: one MoE layer of a real checkpoint on synthetic hidden states, routed by the
// model's own router, on the chosen backend; --check compares to the reference backend.
//
// Flow: load_moe_layer, draw x (T, H) bf16 ~ N(0, 1), logits = x W^T (+ b) in fp32,
// fp4moe::route with the config's routing, prepare, forward with fp32 output, and with
// --check the same on the reference backend: rel L2 = |y - y_ref| / |y_ref| within 5e-4
// (2e-3 for W4A4, whose activation rounding may land on the other side of a tie when the
// fp32 sums run in another order).
#include <chrono>
#include <cmath>
#include <cstdio>

#include "checkpoint_cli.hpp"
#include "fp4moe/checkpoint.hpp"
#include "fp4moe/format.h"
#include "gpu.hpp"
#include "synth.hpp"

namespace fp4moe::cli {
namespace {

float element(const TensorView& v, int64_t i) {
  return v.dtype == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(v.data)[i])
                                : static_cast<const float*>(v.data)[i];
}

// The layer's output (T, H) f32 for x, ids, weights, on `layer`'s device.
std::vector<float> forward(const Layer& layer, const std::vector<uint16_t>& x, const std::vector<int32_t>& ids,
                           const std::vector<float>& w, int64_t T, double* ms) {
  const int64_t H = layer.desc().hidden, k = layer.desc().top_k;
  const DeviceType dev = layer.device();
  const int id = layer.device_id();
  Buffer bx(dev, id, x.size() * 2), bi(dev, id, ids.size() * 4), bw(dev, id, w.size() * 4);
  Buffer bo(dev, id, size_t(T * H) * 4), ws(dev, id, std::max<size_t>(layer.workspace_size(T), 1));
  bx.upload(x.data(), x.size() * 2);
  bi.upload(ids.data(), ids.size() * 4);
  bw.upload(w.data(), w.size() * 4);
  bo.fill(0xFF);  // NaN everywhere: an element the layer leaves unwritten shows up
  ForwardArgs a;
  a.hidden_states = bx.view(DType::bf16, {T, H});
  a.topk_ids = bi.view(DType::i32, {T, k});
  a.topk_weights = bw.view(DType::f32, {T, k});
  a.out = bo.view(DType::f32, {T, H});
  if (layer.workspace_size(T) > 0) a.workspace = ws.view(DType::u8, {int64_t(layer.workspace_size(T))});
  const auto t0 = std::chrono::steady_clock::now();
  layer.forward(a);
  std::vector<float> out(size_t(T * H));
  bo.download(out.data(), out.size() * 4);  // synchronises
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  layer.check_device_errors(a.workspace);
  return out;
}

}  // namespace

int run_layer(const RunOptions& o) {
  try {
    if (o.tokens < 1) throw Error(ErrorKind::invalid_argument, "--tokens: got " + std::to_string(o.tokens) + ", need >= 1");
    const Checkpoint ck = Checkpoint::open(o.checkpoint);
    LoadedLayer L = load_moe_layer(ck, o.layer);
    LayerDesc d = L.desc;
    if (o.quant == "w4a4") {
      if (d.weight_format != WeightFormat::nvfp4)
        throw Error(ErrorKind::invalid_argument, "--quant: got w4a4, need w4a16 for this MXFP4 checkpoint");
      if (!L.weights.w13_input_scale.present())
        throw Error(ErrorKind::invalid_argument,
                    "--quant w4a4: layer " + std::to_string(o.layer) + " of " + o.checkpoint +
                        " has no input_scale (e.g. model.layers." + std::to_string(o.layer) +
                        ".mlp.experts.0.gate_proj.input_scale), need a calibrated checkpoint "
                        "(fp4moe quantize --calibration FILE)");
      d.act_quant = ActQuant::nvfp4;
    }
    const int64_t T = o.tokens, H = d.hidden, E = d.num_experts, k = d.top_k;
    std::printf("layer %d of %s (%s): H=%lld I=%lld E=%lld k=%lld %s %s %s, routing %s\n", o.layer,
                o.checkpoint.c_str(), L.model_type.c_str(), (long long)H, (long long)d.intermediate, (long long)E,
                (long long)k, to_string(d.weight_format), o.quant.c_str(), to_string(d.activation),
                to_string(d.routing.method));

    // Hidden states and the model's own router.
    Rng rng(stream_seed(o.seed, -1, 0));
    std::vector<uint16_t> x(size_t(T * H));
    for (auto& v : x) v = bf16_from_f32(rng.normal());
    std::vector<float> logits(size_t(T * E));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) {
        float acc = 0.0f;
        for (int64_t h = 0; h < H; ++h) acc += bf16_to_f32(x[size_t(t * H + h)]) * element(L.router_weight, e * H + h);
        if (L.router_bias.present()) acc += element(L.router_bias, e);
        logits[size_t(t * E + e)] = acc;
      }
    std::vector<int32_t> ids(size_t(T * k));
    std::vector<float> w(size_t(T * k));
    RouteArgs r;
    r.router_logits = TensorView::of(logits.data(), DType::f32, {T, E});
    r.correction_bias = L.correction_bias;
    r.topk_ids = TensorView::of(ids.data(), DType::i32, {T, k});
    r.topk_weights = TensorView::of(w.data(), DType::f32, {T, k});
    r.top_k = k;
    r.routing = d.routing;
    route(r);

    PrepareOptions po;
    po.backend = o.backend;
    const Layer layer = Layer::prepare(d, L.weights, po);
    std::printf("backend %s (%s)\n", layer.backend().c_str(), layer.selection_reason().c_str());
    double ms = 0;
    const std::vector<float> y = forward(layer, x, ids, w, T, &ms);
    double norm = 0;
    for (float v : y) norm += double(v) * v;
    std::printf("%lld tokens: %.3f ms (one call, with the copy back), |y| = %.6g\n", (long long)T, ms, std::sqrt(norm));
    if (!o.check) return 0;

    PrepareOptions ro;
    ro.backend = "reference";
    const Layer ref = Layer::prepare(d, L.weights, ro);
    double ref_ms = 0;
    const std::vector<float> y_ref = forward(ref, x, ids, w, T, &ref_ms);
    double num = 0, den = 0;
    bool finite = true;
    for (size_t i = 0; i < y.size(); ++i) {
      finite &= std::isfinite(y[i]);
      num += (double(y[i]) - y_ref[i]) * (double(y[i]) - y_ref[i]);
      den += double(y_ref[i]) * y_ref[i];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    const double tol = d.act_quant == ActQuant::nvfp4 ? 2e-3 : 5e-4;
    const bool pass = finite && rel <= tol;
    std::printf("check vs reference: rel L2 %.3g (tolerance %.0e)%s: %s\n", rel, tol,
                finite ? "" : ", non-finite output", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp4moe run: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace fp4moe::cli
