// The SM clock and board power over one timed run of the bench: a thread reads them every period
// until stop(), plus one reading at the start and one at the stop, so that a run of a few
// milliseconds still has two. Why: under the 700 W cap two variants can differ by clock alone (v64:
// the same cycles, 8% apart in time), and the clock a run held tells saved work from a higher
// clock. The reader is a function (NVML's, gpu.cpp nvml_clock_reader, or a test's).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fp4moe::cli {

struct ClockReading {
  unsigned sm_mhz = 0;
  unsigned power_mw = 0;
  bool has_power = false;  // the reader gave the board's power
};

// What the readings of one run say. samples 0 (no reader, or every reading failed): NaN values.
struct ClockStats {
  int samples = 0;
  double sm_mhz_median = NAN;
  double sm_mhz_min = NAN;
  double power_w_mean = NAN;  // over the readings with power; NaN when none had it
};

inline ClockStats clock_stats(const std::vector<ClockReading>& r) {
  ClockStats s;
  s.samples = int(r.size());
  if (r.empty()) return s;
  std::vector<double> mhz;
  double watts = 0;
  int with_power = 0;
  for (const ClockReading& x : r) {
    mhz.push_back(double(x.sm_mhz));
    if (x.has_power) {
      watts += double(x.power_mw) * 1e-3;
      ++with_power;
    }
  }
  std::sort(mhz.begin(), mhz.end());
  const size_t n = mhz.size();
  s.sm_mhz_median = n % 2 ? mhz[n / 2] : 0.5 * (mhz[n / 2 - 1] + mhz[n / 2]);
  s.sm_mhz_min = mhz.front();
  if (with_power > 0) s.power_w_mean = watts / with_power;
  return s;
}

class ClockSampler {
 public:
  // One reading into *out; false when it failed (not counted).
  using Read = std::function<bool(ClockReading* out)>;

  // An empty read samples nothing (stop() gives samples 0).
  ClockSampler(Read read, std::chrono::microseconds period) : read_(std::move(read)), period_(period) {
    if (!read_) return;
    take();
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, period_, [this] { return stopping_; })) {
        lock.unlock();
        take();
        lock.lock();
      }
    });
  }
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;
  ~ClockSampler() { stop(); }

  // Ends the sampling (one last reading) and returns the stats of every reading; again: the same.
  ClockStats stop() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
      }
      cv_.notify_all();
      thread_.join();
      take();
    }
    std::lock_guard<std::mutex> lock(mu_);
    return clock_stats(readings_);
  }

 private:
  void take() {
    ClockReading r;
    if (!read_(&r)) return;  // (outside the lock: a reading takes tens of µs)
    std::lock_guard<std::mutex> lock(mu_);
    readings_.push_back(r);
  }

  Read read_;
  std::chrono::microseconds period_;
  std::mutex mu_;  // stopping_ and readings_
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<ClockReading> readings_;
  std::thread thread_;
};

}  // namespace fp4moe::cli
