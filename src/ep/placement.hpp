// The one placement rule of expert parallelism (ep.hpp), for host and device code.
#pragma once

#include <cstdint>

namespace fp4moe::ep {

#if defined(__CUDACC__)
#define FP4MOE_EP_HD __host__ __device__ inline
#else
#define FP4MOE_EP_HD inline
#endif

// The one placement rule (ep.hpp): E experts over W ranks, the first E % W ranks one more.
struct Placement {
  int64_t E = 0;
  int W = 1;
  FP4MOE_EP_HD int64_t count(int64_t d) const { return E / W + (d < E % W ? 1 : 0); }
  FP4MOE_EP_HD int64_t first(int64_t d) const { return d * (E / W) + (d < E % W ? d : E % W); }
  FP4MOE_EP_HD int64_t n_max() const { return (E + W - 1) / W; }
  FP4MOE_EP_HD int owner(int64_t g) const {
    const int64_t base = E / W, rem = E % W, split = rem * (base + 1);
    return int(g < split ? g / (base + 1) : rem + (g - split) / base);
  }
};

// Throws invalid_argument unless world >= 1, rank in [0, world) and E >= world.
void check_world(const char* entry, int64_t E, int world, int rank);

}  // namespace fp4moe::ep
