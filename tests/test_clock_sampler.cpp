// The bench's clock sampler (tools/clock_sampler.hpp) on a fake reader: its statistics against
// values computed here from the readings it was given, its start and stop readings, a reader
// that fails, and no reader at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "clock_sampler.hpp"

namespace fp4moe::cli {
namespace {

TEST(ClockStats, MedianMinAndMeanPowerOfRandomReadings) {
  std::mt19937 rng{std::random_device{}()};
  for (int n : {1, 2, 7, 40}) {
    std::vector<ClockReading> r(static_cast<size_t>(n));
    std::vector<unsigned> mhz;
    double watts = 0;
    int with_power = 0;
    for (ClockReading& x : r) {
      x.sm_mhz = 1200 + rng() % 800;
      x.has_power = rng() % 3 != 0;
      x.power_mw = x.has_power ? 300000 + rng() % 400000 : 0;
      mhz.push_back(x.sm_mhz);
      if (x.has_power) {
        watts += x.power_mw / 1000.0;
        ++with_power;
      }
    }
    std::sort(mhz.begin(), mhz.end());
    // The median by counting: at least half the readings at or below it, at least half at or above.
    const ClockStats s = clock_stats(r);
    EXPECT_EQ(s.samples, n);
    const auto below = std::count_if(mhz.begin(), mhz.end(), [&](unsigned v) { return v <= s.sm_mhz_median; });
    const auto above = std::count_if(mhz.begin(), mhz.end(), [&](unsigned v) { return v >= s.sm_mhz_median; });
    EXPECT_GE(2 * below, n);
    EXPECT_GE(2 * above, n);
    if (n % 2 == 0) EXPECT_EQ(s.sm_mhz_median, 0.5 * (mhz[size_t(n / 2 - 1)] + mhz[size_t(n / 2)]));
    EXPECT_EQ(s.sm_mhz_min, double(mhz.front()));
    if (with_power > 0) EXPECT_NEAR(s.power_w_mean, watts / with_power, 1e-9);
    else EXPECT_TRUE(std::isnan(s.power_w_mean));
  }
}

TEST(ClockStats, NoReadingsGiveNaN) {
  const ClockStats s = clock_stats({});
  EXPECT_EQ(s.samples, 0);
  EXPECT_TRUE(std::isnan(s.sm_mhz_median));
  EXPECT_TRUE(std::isnan(s.sm_mhz_min));
  EXPECT_TRUE(std::isnan(s.power_w_mean));
}

// A reader that counts its calls and returns 1000 + its call number: the stats say which
// readings the sampler kept.
struct CountingReader {
  std::atomic<int> calls{0};
  ClockSampler::Read read(bool fail = false) {
    return [this, fail](ClockReading* r) {
      const int c = calls.fetch_add(1);
      if (fail) return false;
      r->sm_mhz = 1000u + unsigned(c);
      return true;
    };
  }
};

TEST(ClockSampler, ReadsAtStartAtStopAndInBetween) {
  CountingReader reader;
  ClockSampler s(reader.read(), std::chrono::milliseconds(1));
  EXPECT_EQ(reader.calls.load(), 1);  // the start reading, before the constructor returns
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const ClockStats st = s.stop();
  const int calls = reader.calls.load();
  EXPECT_GE(calls, 3);  // start, at least one from the thread, stop
  EXPECT_EQ(st.samples, calls);
  // Readings 1000 .. 1000 + calls - 1, each once: min and median follow.
  EXPECT_EQ(st.sm_mhz_min, 1000.0);
  EXPECT_EQ(st.sm_mhz_median, 1000.0 + (calls - 1) / 2.0);
  // Stopped: no more readings, and stop() again gives the same.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(reader.calls.load(), calls);
  const ClockStats again = s.stop();
  EXPECT_EQ(again.samples, st.samples);
  EXPECT_EQ(again.sm_mhz_median, st.sm_mhz_median);
}

TEST(ClockSampler, AStopRightAfterTheStartStillHasTwoReadings) {
  CountingReader reader;
  ClockSampler s(reader.read(), std::chrono::seconds(10));  // the thread would wait 10 s: stop wakes it
  const auto t0 = std::chrono::steady_clock::now();
  const ClockStats st = s.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(st.samples, 2);
  EXPECT_EQ(st.sm_mhz_min, 1000.0);
  EXPECT_EQ(st.sm_mhz_median, 1000.5);
}

TEST(ClockSampler, FailedReadingsAreNotCounted) {
  CountingReader reader;
  ClockSampler s(reader.read(true), std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const ClockStats st = s.stop();
  EXPECT_GE(reader.calls.load(), 2);
  EXPECT_EQ(st.samples, 0);
  EXPECT_TRUE(std::isnan(st.sm_mhz_median));
}

TEST(ClockSampler, NoReaderSamplesNothing) {
  ClockSampler s(ClockSampler::Read{}, std::chrono::milliseconds(1));
  const ClockStats st = s.stop();
  EXPECT_EQ(st.samples, 0);
  EXPECT_TRUE(std::isnan(st.power_w_mean));
}

TEST(ClockSampler, DestructorStopsTheThread) {
  CountingReader reader;
  { ClockSampler s(reader.read(), std::chrono::milliseconds(1)); }
  const int calls = reader.calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(reader.calls.load(), calls);
}

}  // namespace
}  // namespace fp4moe::cli
