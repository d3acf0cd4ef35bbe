// quantize_checkpoint: bf16/fp16/f32 MoE experts -> ModelOpt NVFP4 (or MXFP4) checkpoint.
//
// Flow: index the expert linears by name, read the calibration file, then per input shard:
// declare the output tensors (quantized experts replace their .weight by weight /
// weight_scale / weight_scale_2 / input_scale; everything else is declared as it is), and
// stream them through SafetensorsWriter one tensor at a time, so memory stays bounded by
// one linear in f32. Gate and up of an expert share one global scale (SPEC §2): its amax is
// taken over both, read through the memory map even when they sit in different shards.
// Finally the configs (hf_quant_config.json, config.json's quantization_config), the shard
// index and every other file of the directory are written or copied.
//
// Output format checked against ModelOpt's unified HF export docs and vLLM's modelopt.md:
// hf_quant_config.json {"producer": {"name": "modelopt"}, "quantization": {"quant_algo":
// "NVFP4", "group_size": 16, "exclude_modules": [...]}}; vLLM treats every linear not in
// exclude_modules as quantized, so every unquantized linear is listed there by name.
#include "fp4moe/quantize_checkpoint.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "backend.hpp"
#include "format/quant.hpp"
#include "fp4moe/checkpoint.hpp"
#include "fp4moe/format.h"

namespace fp4moe {
namespace {

namespace fs = std::filesystem;
using detail::fail_arg;
using json = nlohmann::ordered_json;

enum class Role { gate, up, down };

// One expert linear of the input, found by its name.
struct ExpertLinear {
  int layer = 0;
  int64_t expert = 0;
  Role role = Role::gate;
  std::string module;   // "model.layers.0.mlp.experts.3.gate_proj" (the name without .weight)
  std::string expert_prefix;   // "model.layers.0.mlp.experts.3."
  std::string layer_prefix;    // "model.layers.0.mlp.experts."
  std::string proj;            // "gate_proj" | "w1" | ...
};

// Qwen3-MoE / DeepSeek / Kimi: mlp.experts.{e}.{gate,up,down}_proj; Mixtral:
// block_sparse_moe.experts.{e}.{w1 (gate), w3 (up), w2 (down)}. Shared experts
// (mlp.shared_experts.gate_proj) do not match: they stay as they are.
std::optional<ExpertLinear> parse_expert(const std::string& name) {
  static const std::regex re(
      R"(^((.*\.layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts\.)(\d+)\.)(gate_proj|up_proj|down_proj|w1|w2|w3)\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return std::nullopt;
  ExpertLinear x;
  try {
    x.layer = std::stoi(m[3].str());
    x.expert = std::stoll(m[4].str());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  x.expert_prefix = m[1].str();
  x.layer_prefix = m[2].str();
  x.proj = m[5].str();
  x.role = (x.proj == "gate_proj" || x.proj == "w1") ? Role::gate : (x.proj == "up_proj" || x.proj == "w3") ? Role::up : Role::down;
  x.module = x.expert_prefix + x.proj;
  return x;
}

std::string partner_proj(const ExpertLinear& x) {
  const bool mixtral = x.proj[0] == 'w';
  if (x.role == Role::gate) return mixtral ? "w3" : "up_proj";
  return mixtral ? "w1" : "gate_proj";
}

// A float tensor [out, in] as f32 rows; NaN/Inf are refused (SPEC §1: no e2m1 code).
std::vector<float> read_f32(const Checkpoint& ck, const std::string& name, int64_t* rows, int64_t* cols) {
  auto [file, t] = ck.find(name);
  const std::string where = file->path() + ": tensor " + name;
  if (t->dtype != "BF16" && t->dtype != "F16" && t->dtype != "F32")
    fail_arg(where + ": dtype: got " + t->dtype + ", need BF16, F16 or F32 (an unquantized checkpoint)");
  if (t->shape.size() != 2)
    fail_arg(where + ": got " + std::to_string(t->shape.size()) + " dims, need [out, in]");
  *rows = t->shape[0];
  *cols = t->shape[1];
  const auto b = file->bytes(*t);
  const size_t n = size_t(*rows * *cols);
  std::vector<float> x(n);
  if (t->dtype == "F32") {
    std::memcpy(x.data(), b.data(), n * 4);
  } else {
    const bool bf = t->dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      x[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      fail_arg(where + ": element " + std::to_string(i) + " is " + std::to_string(x[i]) + ", need finite weights");
  return x;
}

float amax_of(const std::vector<float>& x) {
  float a = 0.0f;
  for (float v : x) a = std::max(a, std::fabs(v));
  return a;
}

// The calibration file: module name or "<layer prefix>*.<proj>" -> input amax.
std::map<std::string, double> read_calibration(const std::string& path) {
  std::map<std::string, double> cal;
  if (path.empty()) return cal;
  std::ifstream f(path);
  if (!f) fail_arg("calibration: cannot open " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    fail_arg("calibration: " + path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) fail_arg("calibration: " + path + ": got " + std::string(j.type_name()) + ", need an object {module: amax}");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number() || !std::isfinite(it.value().get<double>()) || it.value().get<double>() <= 0)
      fail_arg("calibration: " + path + ": \"" + it.key() + "\": got " + it.value().dump() + ", need a finite positive amax");
    cal[it.key()] = it.value().get<double>();
  }
  return cal;
}

// The input amax of one linear from the calibration, or < 0 when it has none.
double input_amax(const std::map<std::string, double>& cal, const ExpertLinear& x, const std::string& proj) {
  auto it = cal.find(x.expert_prefix + proj);
  if (it != cal.end()) return it->second;
  it = cal.find(x.layer_prefix + "*." + proj);
  return it != cal.end() ? it->second : -1.0;
}

std::vector<uint8_t> f32_bytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail_arg("quantize: cannot write " + p.string());
}

}  // namespace

std::vector<int> parse_layer_list(const std::string& text, const std::string& what) {
  std::vector<int> out;
  auto bad = [&] { fail_arg(what + ": got '" + text + "', need layers like 0,3-5"); };
  size_t i = 0;
  auto number = [&]() {
    if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) bad();
    int64_t v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      v = v * 10 + (text[i++] - '0');
      if (v > 1000000) bad();
    }
    return int(v);
  };
  if (text.empty()) bad();
  while (i < text.size()) {
    const int a = number();
    int b = a;
    if (i < text.size() && text[i] == '-') {
      ++i;
      b = number();
      if (b < a) bad();
    }
    for (int l = a; l <= b; ++l) out.push_back(l);
    if (i < text.size()) {
      if (text[i] != ',') bad();
      ++i;
      if (i == text.size()) bad();
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                   const QuantizeOptions& opt) {
  const bool nv = opt.format == WeightFormat::nvfp4;
  const int64_t blk = nv ? kNvfp4Block : kMxfp4Block;
  std::error_code ec;
  if (!fs::is_directory(in_dir)) fail_arg("IN_DIR: got " + in_dir + ", need a checkpoint directory");
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir)) fail_arg("OUT_DIR: cannot create " + out_dir + (ec ? ": " + ec.message() : ""));
  if (fs::equivalent(in_dir, out_dir)) fail_arg("OUT_DIR: got " + out_dir + ", the input directory; need another one");

  const Checkpoint ck = Checkpoint::open(in_dir);
  const std::string cfg_text = ck.read_text("config.json");
  if (cfg_text.empty()) fail_arg(in_dir + "/config.json: not found, need the model's config.json");
  json config;
  try {
    config = json::parse(cfg_text);
  } catch (const std::exception& e) {
    fail_arg(in_dir + "/config.json: not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) fail_arg(in_dir + "/config.json: need a JSON object");
  if (config.contains("quantization_config") || !ck.read_text("hf_quant_config.json").empty())
    fail_arg(in_dir + ": already quantized (quantization_config / hf_quant_config.json), need a bf16/fp16/f32 checkpoint");
  const auto cal = read_calibration(opt.calibration);

  // Index the experts.
  const std::vector<std::string> names = ck.names();
  std::map<std::string, ExpertLinear> experts;
  std::set<int> layers_found;
  for (const auto& n : names)
    if (auto x = parse_expert(n)) {
      experts[n] = *x;
      layers_found.insert(x->layer);
    }
  if (experts.empty())
    fail_arg(in_dir + ": no expert weights found, need names like model.layers.0.mlp.experts.0.gate_proj.weight "
             "or model.layers.0.block_sparse_moe.experts.0.w1.weight");
  std::set<int> selected;
  if (opt.layers.empty()) {
    selected = layers_found;
  } else {
    for (int l : opt.layers) {
      if (!layers_found.count(l))
        fail_arg("layers: got " + std::to_string(l) + ", but " + in_dir + " has no experts in layer " + std::to_string(l));
      selected.insert(l);
    }
  }
  for (auto it = experts.begin(); it != experts.end();)
    it = selected.count(it->second.layer) ? std::next(it) : experts.erase(it);
  // Every gate needs its up (they share one global scale) and the same shape.
  for (const auto& [n, x] : experts) {
    if (x.role == Role::down) continue;
    const std::string partner = x.expert_prefix + partner_proj(x) + ".weight";
    if (!ck.has(partner))
      fail_arg(ck.find(n).first->path() + ": tensor " + n + ": its partner " + partner +
               " is missing (gate and up share one global scale)");
  }

  // Group tensors by input file, in each file's data order.
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> by_file;
  double total = 0;
  for (const auto& n : names) {
    auto [file, t] = ck.find(n);
    by_file[file->path()].push_back({t->begin, n});
    total += double(t->end - t->begin);
  }
  for (auto& [f, v] : by_file) std::sort(v.begin(), v.end());

  QuantizeReport report;
  report.layers.assign(selected.begin(), selected.end());
  std::map<std::string, float> pair_amax;  // expert prefix -> amax over gate and up
  nlohmann::json weight_map = nlohmann::json::object();
  double done = 0, total_size = 0;
  std::set<std::string> excluded;

  for (const auto& [path, list] : by_file) {
    const std::string base = fs::path(path).filename().string();
    // Declarations: shapes only, from the headers.
    std::vector<TensorInfo> decl;
    for (const auto& [off, n] : list) {
      (void)off;
      const TensorInfo& t = *ck.find(n).second;
      auto it = experts.find(n);
      if (it == experts.end()) {
        decl.push_back({n, t.dtype, t.shape, 0, 0});
        if (t.shape.size() == 2 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0)
          excluded.insert(n.substr(0, n.size() - 7));
        continue;
      }
      const ExpertLinear& x = it->second;
      if (t.shape.size() != 2 || t.shape[1] % blk != 0 || t.shape[0] < 1)
        fail_arg(path + ": tensor " + n + ": got shape " + [&] {
          std::string s = "[";
          for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
          return s + "]";
        }() + ", need [out, in] with in a multiple of " + std::to_string(blk));
      const int64_t R = t.shape[0], K = t.shape[1];
      decl.push_back({x.module + ".weight", "U8", {R, K / 2}, 0, 0});
      decl.push_back({x.module + ".weight_scale", nv ? "F8_E4M3" : "F8_E8M0", {R, K / blk}, 0, 0});
      if (nv) decl.push_back({x.module + ".weight_scale_2", "F32", {}, 0, 0});
      const std::string in_proj = x.role == Role::down ? x.proj : partner_proj(x);
      const double a = std::max(input_amax(cal, x, x.proj), x.role == Role::down ? -1.0 : input_amax(cal, x, in_proj));
      if (a > 0) decl.push_back({x.module + ".input_scale", "F32", {}, 0, 0});
    }
    for (const auto& t : decl) {
      weight_map[t.name] = base;
      size_t n = safetensors_dtype_size(t.dtype);
      for (auto d : t.shape) n *= size_t(d);
      total_size += double(n);
    }
    const std::string out_path = (fs::path(out_dir) / base).string();
    SafetensorsWriter w(out_path, decl, {{"format", "pt"}});
    for (const auto& [off, n] : list) {
      (void)off;
      auto [file, t] = ck.find(n);
      auto it = experts.find(n);
      if (it == experts.end()) {
        w.write(n, file->bytes(*t));
        ++report.copied;
      } else {
        const ExpertLinear& x = it->second;
        int64_t R = 0, K = 0;
        const std::vector<float> v = read_f32(ck, n, &R, &K);
        std::vector<uint8_t> data(size_t(R * K / 2)), scale(size_t(R * K / blk));
        if (nv) {
          float amax = 0;
          if (x.role == Role::down) {
            amax = amax_of(v);
          } else {
            auto p = pair_amax.find(x.expert_prefix);
            if (p == pair_amax.end()) {
              int64_t r2 = 0, k2 = 0;
              const std::string partner = x.expert_prefix + partner_proj(x) + ".weight";
              const float other = amax_of(read_f32(ck, partner, &r2, &k2));
              if (k2 != K)
                fail_arg(ck.find(partner).first->path() + ": tensor " + partner + ": got in = " + std::to_string(k2) +
                         ", need " + std::to_string(K) + " like " + n);
              p = pair_amax.emplace(x.expert_prefix, std::max(amax_of(v), other)).first;
            }
            amax = p->second;
          }
          const float dq = detail::nvfp4_weight_dq_scale(amax);
          detail::nvfp4_quantize_rows(v.data(), R, K, 1.0f / dq, data.data(), scale.data());
          w.write(x.module + ".weight", data);
          w.write(x.module + ".weight_scale", scale);
          w.write(x.module + ".weight_scale_2", f32_bytes(dq));
        } else {
          detail::mxfp4_quantize_rows(v.data(), R, K, data.data(), scale.data());
          w.write(x.module + ".weight", data);
          w.write(x.module + ".weight_scale", scale);
        }
        const std::string in_proj = x.role == Role::down ? x.proj : partner_proj(x);
        const double a = std::max(input_amax(cal, x, x.proj), x.role == Role::down ? -1.0 : input_amax(cal, x, in_proj));
        if (a > 0) {
          // ModelOpt's static activation scale: amax / (6 * 448)
          w.write(x.module + ".input_scale", f32_bytes(float(a) / (kE2m1Max * kE4m3Max)));
          ++report.calibrated;
        }
        ++report.linears;
      }
      done += double(t->end - t->begin);
      if (opt.progress) opt.progress(done, total);
    }
    w.close();
    report.files.push_back(out_path);
  }

  // Configs: the quantization section (vLLM reads either file).
  json quant = {{"quant_algo", nv ? "NVFP4" : "MXFP4"},
                {"kv_cache_quant_algo", nullptr},
                {"group_size", blk},
                {"exclude_modules", std::vector<std::string>(excluded.begin(), excluded.end())}};
  json producer = {{"name", "modelopt"}, {"version", std::string("fp4moe ") + version()}};
  write_text(fs::path(out_dir) / "hf_quant_config.json",
             json{{"producer", producer}, {"quantization", quant}}.dump(2) + "\n");
  json qc = {{"quant_method", "modelopt"}};
  for (auto it = quant.begin(); it != quant.end(); ++it) qc[it.key()] = it.value();
  qc["producer"] = producer;
  config["quantization_config"] = qc;
  write_text(fs::path(out_dir) / "config.json", config.dump(2) + "\n");
  if (!ck.read_text("model.safetensors.index.json").empty() || by_file.size() > 1)
    write_text(fs::path(out_dir) / "model.safetensors.index.json",
               nlohmann::json{{"metadata", {{"total_size", int64_t(total_size)}}}, {"weight_map", weight_map}}.dump(2) +
                   "\n");

  // Everything else (tokenizer, generation config, ...) as it is.
  for (const auto& entry : fs::directory_iterator(in_dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".safetensors" || name == "config.json" || name == "hf_quant_config.json" ||
        name == "model.safetensors.index.json")
      continue;
    fs::copy_file(entry.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) fail_arg("quantize: cannot copy " + entry.path().string() + ": " + ec.message());
  }
  return report;
}

}  // namespace fp4moe
