// The CUDA backend's A/B switches and forced choices read from the environment.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>

namespace fp4moe::cuda {

// An A/B switch of the environment (FP4MOE_SM90_PDL=0, FP4MOE_PDL=1, ...): whether `var` is set
// and starts with `c`. Read per call, so that tests and benchmarks can flip it between forwards.
inline bool env_switch(const char* var, char c) {
  const char* v = std::getenv(var);
  return v && v[0] == c;
}

// An integer of the environment (a forced choice, bound or threshold for A/B runs): `fallback`
// where `var` is unset or empty, else its leading integer as std::atoll reads it, clamped to int.
inline int env_int(const char* var, int fallback) {
  const char* v = std::getenv(var);
  if (!v || !*v) return fallback;
  return int(std::clamp<long long>(std::atoll(v), INT_MIN, INT_MAX));
}

// A process-wide forced choice (FP4MOE_SM80_TILE, FP4MOE_SM90_KERNEL, the permute's bounds) held
// in `cache`, -1 until read: read() (the environment's reading) on first use. The first caller's
// reading wins, and a setter's store in between stays.
template <class Read>
int choice_once(std::atomic<int>& cache, Read read) {
  int v = cache.load(std::memory_order_relaxed);
  if (v < 0) {
    const int from_env = read();
    v = cache.compare_exchange_strong(v, from_env, std::memory_order_relaxed) ? from_env : v;
  }
  return v;
}

}  // namespace fp4moe::cuda
