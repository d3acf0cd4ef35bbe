#include "cpu/worker_pool.hpp"

#include <unistd.h>

#include <chrono>

namespace fp4moe::detail {
namespace {

// Spins up to ~50 µs for pred (a forward's next parallel step follows within microseconds),
// then gives up so that an idle thread sleeps instead of holding a core. With more threads than
// cores a spinning thread would hold a core that another needs: no spin.
template <class Pred>
bool spin_until(bool spin, const Pred& pred) {
  if (!spin) return pred();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() > until) return pred();
  }
}

}  // namespace

bool WorkerPool::forked() const { return !workers_.empty() && long(getpid()) != pid_; }

WorkerPool::~WorkerPool() {
  if (forked()) {  // no thread to stop or join here: their handles and sleep_ are let go
    new std::vector<std::thread>(std::move(workers_));
    sleep_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(sleep_->m);
    sleep_->stop = true;
  }
  sleep_->wake.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::take_items(int thread) {
  for (int64_t i = next_.fetch_add(1, std::memory_order_relaxed); i < n_; i = next_.fetch_add(1, std::memory_order_relaxed))
    call_(fn_, i, thread);
}

void WorkerPool::dispatch(int64_t n, Call call, const void* fn) {
  // Grow to the threads this call can use; a thread that cannot be started leaves its items
  // to the others, and no later call tries again.
  const size_t want = size_t(std::min<int64_t>(threads_, n) - 1);
  if (workers_.size() < want && !grow_failed_) {
    if (workers_.empty()) pid_ = long(getpid());
    try {
      workers_.reserve(want);
      while (workers_.size() < want)
        workers_.emplace_back(&WorkerPool::worker, this, int(workers_.size()) + 1, generation_.load(std::memory_order_relaxed));
    } catch (...) {
      grow_failed_ = true;
    }
  }
  call_ = call;
  fn_ = fn;
  n_ = n;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(sleep_->m);  // a worker about to sleep sees the bump or the notify
    generation_.fetch_add(1, std::memory_order_release);
  }
  sleep_->wake.notify_all();
  take_items(0);
  // Every worker reports, even one that found no item left, so the job stays valid until here.
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(spin_, done)) {
    std::unique_lock<std::mutex> lock(sleep_->m);
    sleep_->done.wait(lock, done);
  }
}

void WorkerPool::worker(int thread, uint64_t seen) {
  for (;;) {
    auto bumped = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(spin_, bumped)) {
      std::unique_lock<std::mutex> lock(sleep_->m);
      sleep_->wake.wait(lock, [&] { return sleep_->stop || bumped(); });
      if (sleep_->stop) return;
    }
    seen = generation_.load(std::memory_order_acquire);  // one bump: the caller waits for this report
    take_items(thread);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(sleep_->m);
      sleep_->done.notify_one();
    }
  }
}

}  // namespace fp4moe::detail
