// fp4moe info: what this build and this machine can run, and what the selection ladder
// picks for every preset.
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fp4moe/fp4moe.hpp"
#include "fp4moe/presets.hpp"

namespace fp4moe::cli {

int run_info(const InfoOptions& opt) {
  nlohmann::json j;
  BuildInfo bi;
  std::string build_error;
  try {
    bi = build_info();
  } catch (const std::exception& e) {
    build_error = e.what();
  }
  j["version"] = version();
  j["cuda_archs"] = bi.cuda_archs;
  j["cuda_devices"] = bi.cuda_devices;
  j["cpu_simd"] = bi.cpu_simd;
  if (!build_error.empty()) j["build_info_error"] = build_error;

  nlohmann::json jb = nlohmann::json::array();
  std::vector<BackendInfo> bs;
  try {
    bs = backends();
  } catch (const std::exception& e) {
    j["backends_error"] = e.what();
  }
  for (const BackendInfo& b : bs)
    jb.push_back({{"name", b.name}, {"device", b.device == DeviceType::cuda ? "cuda" : "cpu"},
                  {"available", b.available}, {"reason", b.reason}});
  j["backends"] = jb;

  nlohmann::json js = nlohmann::json::array();
  for (const Preset& p : presets()) {
    std::vector<ActQuant> quants{ActQuant::none};
    if (p.desc.weight_format == WeightFormat::nvfp4) quants.push_back(ActQuant::nvfp4);
    for (ActQuant q : quants) {
      LayerDesc d = p.desc;
      d.act_quant = q;
      nlohmann::json row{{"preset", p.name}, {"format", to_string(d.weight_format)},
                         {"quant", q == ActQuant::nvfp4 ? "w4a4" : "w4a16"}};
      try {
        const Selection s = select_backend(d);
        row["backend"] = s.backend;
        row["reason"] = s.reason;
      } catch (const std::exception& e) {
        row["backend"] = nullptr;
        row["reason"] = e.what();
      }
      js.push_back(row);
    }
  }
  j["selection"] = js;

  if (opt.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("fp4moe %s\n", version());
  std::string archs;
  for (const auto& a : bi.cuda_archs) archs += (archs.empty() ? "" : ", ") + a;
  std::printf("CUDA architectures compiled in: %s\n", archs.empty() ? "none (CPU-only build)" : archs.c_str());
  std::printf("CUDA devices: %d\n", bi.cuda_device_count);
  for (size_t i = 0; i < bi.cuda_devices.size(); ++i) std::printf("  %zu: %s\n", i, bi.cuda_devices[i].c_str());
  std::printf("CPU backend SIMD: %s (FP4MOE_CPU_SIMD=%s)\n", bi.cpu_simd.c_str(),
              std::getenv("FP4MOE_CPU_SIMD") ? std::getenv("FP4MOE_CPU_SIMD") : "unset");
  if (!build_error.empty()) std::printf("  (build_info failed: %s)\n", build_error.c_str());

  std::printf("\nBackends (best first):\n");
  for (const BackendInfo& b : bs)
    std::printf("  %-12s %-5s %-13s %s\n", b.name.c_str(), b.device == DeviceType::cuda ? "cuda" : "cpu",
                b.available ? "available" : "unavailable", b.reason.c_str());
  if (j.contains("backends_error")) std::printf("  (backends() failed: %s)\n", j["backends_error"].get<std::string>().c_str());

  std::printf("\nSelection per preset (FP4MOE_BACKEND=%s):\n", std::getenv("FP4MOE_BACKEND") ? std::getenv("FP4MOE_BACKEND") : "unset");
  for (const auto& row : js)
    std::printf("  %-13s %-6s %-6s -> %-12s %s\n", row["preset"].get<std::string>().c_str(),
                row["format"].get<std::string>().c_str(), row["quant"].get<std::string>().c_str(),
                row["backend"].is_null() ? "none" : row["backend"].get<std::string>().c_str(),
                row["reason"].get<std::string>().c_str());
  return 0;
}

}  // namespace fp4moe::cli
