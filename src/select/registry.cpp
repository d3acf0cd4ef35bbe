// The ladder, best first: the first backend that can run here and serves the layer
// wins under "auto" (select.cpp). Adding a backend is one line here plus its entry.
#include "backend.hpp"

namespace fp4moe::detail {

const std::vector<BackendEntry>& registry() {
  static const std::vector<BackendEntry> ladder = [] {
    std::vector<BackendEntry> v;
#if defined(FP4MOE_WITH_CUDA)
    v.push_back(cuda_backend_entry());
#endif
    v.push_back(cpu_backend_entry());
    v.push_back(reference_backend_entry());
    return v;
  }();
  return ladder;
}

}  // namespace fp4moe::detail
