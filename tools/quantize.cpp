// fp4moe quantize IN_DIR OUT_DIR: a bf16/fp16/f32 MoE checkpoint -> ModelOpt NVFP4 (or
// MXFP4) experts, everything else copied; a progress line with ETA on stderr.
#include <cstdio>

#include "checkpoint_cli.hpp"
#include "fp4moe/quantize_checkpoint.hpp"
#include "synth.hpp"

namespace fp4moe::cli {

int run_quantize(const QuantizeCliOptions& o) {
  try {
    QuantizeOptions q;
    q.format = o.format == "mxfp4" ? WeightFormat::mxfp4 : WeightFormat::nvfp4;
    if (!o.layers.empty()) q.layers = parse_layer_list(o.layers, "--layers");
    q.calibration = o.calibration;
    constexpr double kGB = 1e9;
    Progress bar("quantize", 0, "GB", true);
    bool started = false;
    q.progress = [&](double done, double total) {
      if (!started) bar = Progress("quantize", total / kGB, "GB", true);
      started = true;
      bar.update(done / kGB);
    };
    const QuantizeReport r = quantize_checkpoint(o.in_dir, o.out_dir, q);
    bar.finish();
    std::string layers;
    for (int l : r.layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    std::printf("quantized %lld expert linears (%s) in layer(s) %s (%lld of them with an input_scale); "
                "copied %lld tensors; wrote %zu file(s) to %s\n",
                (long long)r.linears, o.format.c_str(), layers.c_str(), (long long)r.calibrated,
                (long long)r.copied, r.files.size(), o.out_dir.c_str());
    if (r.calibrated < r.linears)
      std::printf("note: %lld linears have no input_scale (no --calibration amax): W4A4 will refuse those layers\n",
                  (long long)(r.linears - r.calibrated));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfp4moe quantize: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace fp4moe::cli
