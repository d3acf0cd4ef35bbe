// Backend selection (STYLE: one flat ladder with reason strings, forced by one option).
//
// "auto" (or FP4MOE_BACKEND when set) walks registry() best first and keeps the first
// backend that can run here and serves the layer; the reason names it and why each
// better one was passed over. A named backend is honoured or refused with the reason:
// never a silent fallback.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "backend.hpp"
#include "prepare/prepare.hpp"

namespace fp4moe {
namespace {

using detail::BackendEntry;
using detail::registry;

// Backends the project has but this build may lack, so that asking for one says why.
struct NotBuilt {
  const char* name;
  DeviceType device;
  const char* why;
};
const NotBuilt kNotBuilt[] = {
    {"cuda", DeviceType::cuda, "this build has no CUDA backend (configured with FP4MOE_CUDA=OFF or without nvcc)"},
};

const BackendEntry* find_entry(const std::string& name) {
  for (const BackendEntry& e : registry())
    if (name == e.name) return &e;
  return nullptr;
}

const NotBuilt* find_not_built(const std::string& name) {
  if (find_entry(name)) return nullptr;
  for (const NotBuilt& n : kNotBuilt)
    if (name == n.name) return &n;
  return nullptr;
}

std::string known_names() {
  std::string s = "auto";
  for (const BackendEntry& e : registry()) s += std::string(", ") + e.name;
  for (const NotBuilt& n : kNotBuilt)
    if (!find_entry(n.name)) s += std::string(", ") + n.name + " (not built)";
  return s;
}

// Backends that can run here and (when desc is given) serve desc.
std::string available_names(const LayerDesc* desc) {
  std::string s;
  for (const BackendEntry& e : registry()) {
    if (!e.why_not_here().empty()) continue;
    if (desc && !e.why_not_for(*desc).empty()) continue;
    s += (s.empty() ? "" : ", ") + std::string(e.name);
  }
  return s.empty() ? "none" : s;
}

Selection forced(const LayerDesc& desc, const std::string& name, const std::string& source) {
  const std::string who = "backend '" + name + "'" + (source == "FP4MOE_BACKEND" ? " (from FP4MOE_BACKEND)" : "");
  if (const NotBuilt* n = find_not_built(name))
    detail::fail(ErrorKind::unsupported, "select_backend: " + who + " cannot run here: " + n->why +
                                             "; available here: " + available_names(nullptr));
  const BackendEntry* e = find_entry(name);
  if (!e)
    detail::fail_arg("select_backend: " + source + ": got '" + name + "', need one of: " + known_names());
  if (std::string why = e->why_not_here(); !why.empty())
    detail::fail(ErrorKind::unsupported,
                 "select_backend: " + who + " cannot run here: " + why + "; available here: " + available_names(nullptr));
  if (std::string why = e->why_not_for(desc); !why.empty())
    detail::fail(ErrorKind::unsupported, "select_backend: " + who + " cannot serve this layer: " + why +
                                             "; available for it: " + available_names(&desc));
  return {name, "requested by " + source};
}

Selection ladder(const LayerDesc& desc) {
  std::string passed;  // "; cuda skipped: no CUDA device" for each better backend passed over
  for (const NotBuilt& n : kNotBuilt)
    if (!find_entry(n.name)) passed += std::string("; ") + n.name + " skipped: " + n.why;
  for (const BackendEntry& e : registry()) {
    std::string why = e.why_not_here();
    if (why.empty()) why = e.why_not_for(desc);
    if (why.empty()) return {e.name, e.why_chosen + passed};
    passed += std::string("; ") + e.name + " skipped: " + why;
  }
  detail::fail(ErrorKind::unsupported, "select_backend: no backend serves this layer" + passed);
}

std::string shape_key(const LayerDesc& d) {
  return "H=" + std::to_string(d.hidden) + " I=" + std::to_string(d.intermediate) + " E=" +
         std::to_string(d.num_experts) + " k=" + std::to_string(d.top_k) + " " + to_string(d.weight_format) +
         (d.act_quant == ActQuant::nvfp4 ? " W4A4 " : " W4A16 ") + to_string(d.activation);
}

// FP4MOE_LOG=1: one stderr line per distinct (layer shape, request, choice).
void log_once(const LayerDesc& desc, const std::string& requested, const Selection& s) {
  const char* log = std::getenv("FP4MOE_LOG");
  if (!log || std::string(log) != "1") return;
  static std::mutex mu;
  static std::set<std::string> seen;
  const std::string key = shape_key(desc) + " [" + requested + "] -> " + s.backend;
  std::lock_guard<std::mutex> lock(mu);
  if (!seen.insert(key).second) return;
  std::fprintf(stderr, "fp4moe: select %s -> %s: %s\n", (shape_key(desc) + " [" + requested + "]").c_str(),
               s.backend.c_str(), s.reason.c_str());
}

}  // namespace

Selection select_backend(const LayerDesc& desc, const std::string& requested) {
  detail::validate_desc("select_backend", desc);
  std::string name = requested, source = "backend";
  if (name == "auto") {
    const char* env = std::getenv("FP4MOE_BACKEND");
    if (env && *env && std::string(env) != "auto") {
      name = env;
      source = "FP4MOE_BACKEND";
    }
  }
  Selection s = name == "auto" ? ladder(desc) : forced(desc, name, source);
  log_once(desc, requested, s);
  return s;
}

std::vector<BackendInfo> backends() {
  std::vector<BackendInfo> v;
  for (const NotBuilt& n : kNotBuilt)
    if (!find_entry(n.name)) v.push_back({n.name, n.device, false, n.why});
  for (const BackendEntry& e : registry()) {
    std::string why = e.why_not_here();
    const bool ok = why.empty();
    v.push_back({e.name, e.device, ok, ok ? std::string(e.why_chosen) : why});
  }
  return v;
}

}  // namespace fp4moe
