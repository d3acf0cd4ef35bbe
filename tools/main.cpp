// fp4moe: the command-line tool. `fp4moe info` reports the build, the machine and the
// backend choice per preset; `fp4moe bench` times one preset's MoE layer on synthetic
// weights and optionally checks it against the reference backend.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "fp4moe/presets.hpp"

int main(int argc, char** argv) {
  using namespace fp4moe::cli;
  CLI::App app{"fp4moe: FP4 (NVFP4, MXFP4) Mixture-of-Experts layers"};
  app.require_subcommand(1);

  InfoOptions info;
  auto* info_cmd = app.add_subcommand("info", "version, CUDA architectures and devices, backends, selection per preset");
  info_cmd->add_flag("--json", info.json, "print JSON instead of text");

  BenchOptions b;
  std::string preset_names;
  for (const auto& p : fp4moe::presets()) preset_names += std::string(preset_names.empty() ? "" : ", ") + p.name;
  auto* bench = app.add_subcommand("bench", "time one preset's MoE layer on synthetic weights");
  bench->add_option("--model", b.model, "preset: " + preset_names)->required();
  bench->add_option("--tokens", b.tokens, "token counts, comma separated")->delimiter(',')->capture_default_str();
  bench->add_option("--backend", b.backend, "auto or a backend name (see fp4moe info)")->capture_default_str();
  bench->add_option("--quant", b.quant, "w4a16 | w4a4 (NVFP4 presets)")
      ->check(CLI::IsMember({"w4a16", "w4a4"}))->capture_default_str();
  bench->add_option("--experts", b.experts, "override E (default: the preset's)")->check(CLI::PositiveNumber);
  bench->add_option("--iters", b.iters, "timed runs per token count (default 50 on CUDA, 5 on the host)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--warmup", b.warmup, "untimed runs first (default 10 on CUDA, 1 on the host)")
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--sets", b.sets, "independent routing + activation sets, rotated across runs")
      ->check(CLI::Range(1, 64))->capture_default_str();
  bench->add_flag("--skew", b.skew, "Zipf-like router logits: a few experts get most tokens");
  bench->add_flag("--check", b.check, "compare sampled tokens against the reference backend (exit 1 on FAIL)");
  bench->add_option("--json", b.json_path, "write the results as JSON to this file");
  bench->add_option("--seed", b.seed, "seed of the synthetic weights and inputs")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (*info_cmd) return run_info(info);
  if (*bench) return run_bench(b);
  return 2;
}
