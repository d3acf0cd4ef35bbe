// Every fp32 bit pattern in parallel: the loop of the exhaustive format tests (test_format.cpp)
// and of the GPU encoders' checksum test (cuda/test_gemm.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace fp4moe::testing {

// How many slices for_each_pattern_slice cuts [0, 2^32) into: the machine's threads, at least 2.
inline unsigned pattern_slices() { return std::max(2u, std::thread::hardware_concurrency()); }

// fn(t, lo, hi) for each slice t < pattern_slices() of [0, 2^32), [lo, hi), each on a thread of
// its own; returns when all are done.
template <class Fn>
void for_each_pattern_slice(const Fn& fn) {
  const unsigned n = pattern_slices();
  const uint64_t end = uint64_t(1) << 32, step = (end + n - 1) / n;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n; ++t)
    pool.emplace_back([&fn, t, step, end] { fn(t, t * step, std::min(t * step + step, end)); });
  for (std::thread& th : pool) th.join();
}

}  // namespace fp4moe::testing
