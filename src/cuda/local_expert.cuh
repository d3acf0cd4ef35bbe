// The one rule from a top-k id to the layer's local expert (SPEC §6, expert parallelism): the
// permute and the T = 1 decode GEMM 1 (which maps its CTAs to the top-k slots itself) both
// apply it, so they agree on every id.
#pragma once

#include <cstdint>

namespace fp4moe::cuda {

// The local expert of top-k id `id` through `map` (global id -> local expert or -1), or -1: for
// -1, for an id outside [0, E) (never used as an index; the permute reports it), and for an
// expert that is not local.
__device__ __forceinline__ int local_expert(int32_t id, const int32_t* map, int64_t E, int64_t num_local) {
  if (id < 0 || id >= E) return -1;
  const int32_t l = map[id];
  return (l >= 0 && l < num_local) ? l : -1;  // prepare checked the map; stay in bounds anyway
}

}  // namespace fp4moe::cuda
