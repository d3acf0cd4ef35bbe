// The CPU backend's threads, kept between calls: run(n, fn) is parallel.hpp's parallel_for
// without starting and joining threads each time (~34 µs a call on a 2-core host, a few per
// forward).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "parallel.hpp"

namespace fp4moe::detail {

class WorkerPool {
 public:
  // Up to `threads` threads a call, the caller's among them; the others start at the first call
  // that needs them and stay until the pool is destroyed.
  explicit WorkerPool(int threads)
      : threads_(threads), spin_(unsigned(threads) <= std::max(1u, std::thread::hardware_concurrency())) {}
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // fn(item, thread) for item in [0, n), thread in [0, threads): as parallel_for (items from an
  // atomic counter, so a result must not depend on the thread; fn must not throw). A call made
  // while another is in flight (another thread's forward) starts threads of its own instead.
  template <class Fn>
  void run(int64_t n, const Fn& fn) {
    if (std::min<int64_t>(threads_, n) <= 1) return parallel_for(n, threads_, fn);  // its loop on this thread
    std::unique_lock<std::mutex> owner(busy_, std::try_to_lock);
    if (!owner.owns_lock() || forked()) return parallel_for(n, threads_, fn);
    dispatch(n, &call<Fn>, &fn);
  }

  // Threads started so far, the caller's not counted (for tests).
  int workers() const { return int(workers_.size()); }

 private:
  using Call = void (*)(const void* fn, int64_t item, int thread);
  template <class Fn>
  static void call(const void* fn, int64_t item, int thread) {
    (*static_cast<const Fn*>(fn))(item, thread);
  }
  void dispatch(int64_t n, Call call, const void* fn);
  void take_items(int thread);
  void worker(int thread, uint64_t seen);
  // A fork's child has the pool but none of its threads (and sleep_->m may have been held at the fork):
  // it runs every call on threads of its own and never waits for the workers.
  bool forked() const;

  const int threads_;
  const bool spin_;  // wait by spinning first: no more threads than cores
  std::mutex busy_;  // held by the call in flight
  std::vector<std::thread> workers_;
  bool grow_failed_ = false;
  long pid_ = 0;  // the process that started workers_

  // The job: written by dispatch before it bumps generation_ (release); read by the workers
  // after they see the bump (acquire); unchanged until every worker has reported (pending_).
  Call call_ = nullptr;
  const void* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers not done with the current generation

  // Sleeping workers and a waiting caller. On the heap: a fork's child lets it go undestroyed
  // (the parent's sleeping workers are waiters of its condition variables there, and destroying
  // a condition variable waits for its waiters).
  struct Sleep {
    std::mutex m;
    std::condition_variable wake, done;
    bool stop = false;
  };
  std::unique_ptr<Sleep> sleep_ = std::make_unique<Sleep>();
};

}  // namespace fp4moe::detail
