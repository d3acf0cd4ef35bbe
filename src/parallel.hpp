// Host-side work spread over threads: the CPU backend's forward and the weight preparation.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace fp4moe::detail {

// Runs fn(item, thread) for item in [0, n) on up to `threads` threads (the caller is thread 0).
// Items are handed out by an atomic counter, so an item's result must not depend on which
// thread ran it. Threads are spawned and joined per call (tens of microseconds) and no state
// outlives it; a thread that cannot be started leaves its items to the others. fn must not
// throw.
template <class Fn>
void parallel_for(int64_t n, int threads, const Fn& fn) {
  const int nt = int(std::min<int64_t>(threads, n));
  if (nt <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  auto work = [&](int tid) {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i, tid);
  };
  std::vector<std::thread> pool;
  try {
    pool.reserve(size_t(nt - 1));
    for (int t = 1; t < nt; ++t) pool.emplace_back(work, t);
  } catch (...) {  // no more threads: those started and this one take every item
  }
  work(0);
  for (std::thread& t : pool) t.join();
}

// Threads for bulk host work outside the CPU backend (the preparation): the hardware's, 1 to 64.
inline int host_threads() { return int(std::clamp(std::thread::hardware_concurrency(), 1u, 64u)); }

}  // namespace fp4moe::detail
