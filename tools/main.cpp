// fp4moe: the command-line tool. `fp4moe info` reports the build, the machine and the
// backend choice per preset; `fp4moe bench` times one preset's MoE layer on synthetic
// weights and optionally checks it against the reference backend; `fp4moe quantize` turns a
// bf16 MoE checkpoint into a ModelOpt NVFP4 one and `fp4moe run` runs one layer of a real
// checkpoint through its own router (tools/checkpoint_cli.hpp).
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "checkpoint_cli.hpp"
#include "cli.hpp"
#include "ep_bench.hpp"
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
  bench->add_option("--model", b.model, "preset: " + preset_names + ", or all");
  bench->add_flag("--all", b.all,
                  "every preset (W4A16 and W4A4 where NVFP4), default tokens 1..16384; with --model a,b only those");
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
  bench->add_flag_callback("--check", [&b] { b.check = 1; },
                           "compare sampled tokens against the reference backend (exit 1 on FAIL); "
                           "default: on unless --all or more than 4 token counts");
  bench->add_flag_callback("--no-check", [&b] { b.check = 0; }, "speed run only");
  bench->add_flag("!--no-baseline", b.baseline, "skip the bf16 cuBLAS baseline");
  bench->add_flag("!--no-ceilings", b.ceilings,
                  "skip measuring the copy and GEMM ceilings (no floor; for profilers, which would see their kernels)");
  bench->add_option("--copies", b.copies, "weight copies rotated (default: enough that touched x copies >= 4 x L2)")
      ->check(CLI::Range(1, 64));
  bench->add_flag("--routing-only", b.routing_only,
                  "print the experts each set's routing touches per token count against uniform routing's "
                  "expectation, and stop (no weights, no timing)");
  bench->add_flag("--nodes", b.nodes,
                  "also time each node of the forward's CUDA graph in place (events between the nodes, "
                  "replays one at a time after the timed runs)");
  bench->add_option("--rest-us", b.rest_us,
                    "with --nodes: idle the GPU this many µs before each of those replays (a rested GPU's "
                    "clocks against the timed runs' back-to-back replays)")
      ->check(CLI::Range(0, 1000000));
  bench->add_option("--layers", b.layers,
                    "layer calls per timed CUDA graph, back to back over the rotated sets and weight copies, "
                    "as a model's decode graph holds one per layer; µs are per call (CUDA only; not with --nodes)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  bench->add_option("--warmup-ms", b.warmup_ms,
                    "CUDA: after the warmup runs, untimed replays until this many ms have passed, so that the "
                    "timed runs see the clocks of a sustained load (the power cap; default 2000; 0: the first "
                    "replays of a rested GPU)")
      ->check(CLI::Range(0.0, 60000.0));
  bench->add_option("--zero-tokens", b.zero_tokens,
                    "this fraction of the tokens (evenly spread: 0.5 every other one) with zero hidden states, "
                    "the rest as without it: the same routing, bytes and instructions with less data switching, "
                    "a probe of how the data sets the clock under the power cap (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  bench->add_option("--json", b.json_path, "write the results as JSON to this file");
  bench->add_option("--seed", b.seed, "seed of the synthetic weights and inputs")->capture_default_str();

  QuantizeCliOptions q;
  auto* quantize = app.add_subcommand("quantize", "quantize the experts of a bf16 MoE checkpoint (ModelOpt layout)");
  quantize->add_option("IN_DIR", q.in_dir, "bf16/fp16/f32 checkpoint directory")->required();
  quantize->add_option("OUT_DIR", q.out_dir, "output directory")->required();
  quantize->add_option("--format", q.format, "nvfp4 | mxfp4")->check(CLI::IsMember({"nvfp4", "mxfp4"}))->capture_default_str();
  quantize->add_option("--layers", q.layers, "MoE layers to quantize, e.g. 0,3-5 (default: all)");
  quantize->add_option("--calibration", q.calibration, "JSON {module: input amax} for input_scale (W4A4)");

  RunOptions r;
  auto* run = app.add_subcommand("run", "run one layer of a real checkpoint through its own router");
  run->add_option("--checkpoint", r.checkpoint, "checkpoint directory")->required();
  run->add_option("--layer", r.layer, "MoE layer index")->required();
  run->add_option("--tokens", r.tokens, "synthetic tokens")->check(CLI::PositiveNumber)->capture_default_str();
  run->add_option("--backend", r.backend, "auto or a backend name (see fp4moe info)")->capture_default_str();
  run->add_option("--quant", r.quant, "w4a16 | w4a4 (NVFP4 checkpoints)")
      ->check(CLI::IsMember({"w4a16", "w4a4"}))->capture_default_str();
  run->add_flag("--check", r.check, "compare to the reference backend (exit 1 on FAIL)");
  run->add_option("--seed", r.seed, "seed of the hidden states")->capture_default_str();

  EpBenchOptions eb;
  auto* ep_bench = app.add_subcommand("ep-bench", "expert parallelism over every visible GPU vs the single-GPU layer");
  ep_bench->add_option("--model", eb.model, "preset: " + preset_names)->required();
  ep_bench->add_option("--tokens", eb.tokens, "tokens per rank, comma separated")->delimiter(',')->capture_default_str();
  ep_bench->add_option("--mode", eb.mode, "a2a | allreduce | both")
      ->check(CLI::IsMember({"a2a", "allreduce", "both"}))->capture_default_str();
  ep_bench->add_option("--quant", eb.quant, "w4a16 | w4a4 (NVFP4 presets)")
      ->check(CLI::IsMember({"w4a16", "w4a4"}))->capture_default_str();
  ep_bench->add_option("--dispatch", eb.dispatch, "a2a rows on the wire: bf16 | nvfp4 (w4a4)")
      ->check(CLI::IsMember({"bf16", "nvfp4"}))->capture_default_str();
  ep_bench->add_option("--combine", eb.combine, "a2a rows back: f32 (exact) | bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  ep_bench->add_option("--experts", eb.experts, "override E (default: the preset's)")->check(CLI::PositiveNumber);
  ep_bench->add_option("--gpus", eb.gpus, "ranks (default: every visible GPU)")->check(CLI::Range(2, 64));
  ep_bench->add_option("--capacity-factor", eb.capacity_factor,
                       "a2a capacities = factor x the rows this routing needs; 0: the never-overflowing defaults")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  ep_bench->add_option("--iters", eb.iters, "timed forwards per token count (default 20)")->check(CLI::PositiveNumber);
  ep_bench->add_option("--warmup", eb.warmup, "untimed forwards first (default 5)")->check(CLI::NonNegativeNumber);
  ep_bench->add_flag("!--no-check", eb.check, "skip comparing rank 0's output with the single-GPU layer");
  ep_bench->add_option("--json", eb.json_path, "write the results as JSON to this file");
  ep_bench->add_option("--seed", eb.seed, "seed of the synthetic weights and inputs")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (*ep_bench) return run_ep_bench(eb);
  if (*info_cmd) return run_info(info);
  if (*bench) {
    b.tokens_given = bench->count("--tokens") > 0;
    return run_bench(b);
  }
  if (*quantize) return run_quantize(q);
  if (*run) return run_layer(r);
  return 2;
}
