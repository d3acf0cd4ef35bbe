// dlopen of libnccl.so.2 and dlsym of the functions fp4moe calls (nccl_loader.hpp).
#if defined(FP4MOE_WITH_EP)
#include "ep/nccl_loader.hpp"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

#include "backend.hpp"

namespace fp4moe::ep {
namespace {

struct Loaded {
  NcclApi api{};
  bool ok = false;
  std::string why;
};

// Where to look, in order. FP4MOE_NCCL_LIB may name the library or its directory.
std::vector<std::string> candidates() {
  std::vector<std::string> v;
  if (const char* env = std::getenv("FP4MOE_NCCL_LIB"); env && *env) {
    std::string p = env;
    v.push_back(p);
    v.push_back(p + "/libnccl.so.2");
  }
  v.push_back("libnccl.so.2");
  v.push_back("libnccl.so");
  // pip's nvidia-nccl-cu12/cu13: <site-packages>/nvidia/nccl/lib/libnccl.so.2
  if (const char* pp = std::getenv("PYTHONPATH"); pp && *pp) {
    std::stringstream ss(pp);
    for (std::string dir; std::getline(ss, dir, ':');)
      if (!dir.empty()) v.push_back(dir + "/nvidia/nccl/lib/libnccl.so.2");
  }
  std::vector<std::string> patterns;
  for (const char* env : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* p = std::getenv(env); p && *p)
      patterns.push_back(std::string(p) + "/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  if (const char* home = std::getenv("HOME"); home && *home)
    patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  for (const char* p : {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                        "/usr/lib/python3/dist-packages", "/opt/conda/lib/python3*/site-packages"})
    patterns.push_back(std::string(p) + "/nvidia/nccl/lib/libnccl.so.2");
  for (const std::string& pat : patterns) {
    glob_t g{};
    if (glob(pat.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) v.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return v;
}

template <class F>
bool sym(void* h, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(h, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
  return f != nullptr;
}

Loaded load() {
  Loaded l;
  void* h = nullptr;
  std::string tried;
  for (const std::string& c : candidates()) {
    h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    tried += (tried.empty() ? "" : ", ") + c;
  }
  if (!h) {
    if (tried.size() > 400) tried = tried.substr(0, 400) + "...";
    l.why = "NCCL not found (tried " + tried +
            "); set FP4MOE_NCCL_LIB to libnccl.so.2 or its directory (pip install nvidia-nccl-cu12 has one)";
    return l;
  }
  std::string missing;
  NcclApi& a = l.api;
  sym(h, "ncclGetVersion", a.GetVersion, missing);
  sym(h, "ncclGetUniqueId", a.GetUniqueId, missing);
  sym(h, "ncclCommInitRank", a.CommInitRank, missing);
  sym(h, "ncclCommInitAll", a.CommInitAll, missing);
  sym(h, "ncclCommDestroy", a.CommDestroy, missing);
  sym(h, "ncclCommCount", a.CommCount, missing);
  sym(h, "ncclCommUserRank", a.CommUserRank, missing);
  sym(h, "ncclCommCuDevice", a.CommCuDevice, missing);
  sym(h, "ncclGetErrorString", a.GetErrorString, missing);
  sym(h, "ncclGroupStart", a.GroupStart, missing);
  sym(h, "ncclGroupEnd", a.GroupEnd, missing);
  sym(h, "ncclSend", a.Send, missing);
  sym(h, "ncclRecv", a.Recv, missing);
  sym(h, "ncclAllReduce", a.AllReduce, missing);
  if (!missing.empty()) {
    l.why = "the NCCL library found lacks " + missing + " (need NCCL >= 2.7 for ncclSend/ncclRecv)";
    return l;  // the handle stays open: unloading a half-used library buys nothing
  }
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const NcclApi* nccl_api(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.why;
  return l.ok ? &l.api : nullptr;
}

const NcclApi& nccl() {
  std::string why;
  const NcclApi* a = nccl_api(&why);
  if (!a) detail::fail(ErrorKind::unsupported, "expert parallelism: " + why);
  return *a;
}

void nccl_check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  const NcclApi* a = nccl_api();
  detail::fail(ErrorKind::device, std::string("NCCL error in ") + what + ": " +
                                      (a ? std::string(a->GetErrorString(r)) : "code " + std::to_string(int(r))));
}

}  // namespace fp4moe::ep

#endif  // FP4MOE_WITH_EP
