#include "prepare/host_bytes.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace fp4moe::detail {

void parallel_for(size_t n, bool serial, const std::function<void(size_t)>& f) {
  if (n == 0) return;
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = serial ? 1 : std::min({hw, n, size_t(64)});
  auto slice = [&](size_t t) {
    for (size_t i = n * t / threads; i < n * (t + 1) / threads; ++i) f(i);
  };
  std::vector<std::thread> pool;
  size_t started = 1;
  if (threads > 1) {
    try {
      pool.reserve(threads - 1);
      for (; started < threads; ++started) pool.emplace_back(slice, started);
    } catch (...) {  // no thread for the rest: they run here
    }
  }
  for (size_t t = started; t < threads; ++t) slice(t);
  slice(0);
  for (std::thread& th : pool) th.join();
}

void parallel_copy_rows(uint8_t* dst, size_t dst_pitch, const uint8_t* src, size_t src_pitch, size_t width,
                        size_t height) {
  if (width == 0 || height == 0) return;
  const bool serial = width * height < kParallelCopyMin;
  if (src_pitch == width && dst_pitch == width) {  // one block: slices of 1 MiB
    const size_t bytes = width * height, piece = size_t(1) << 20;
    parallel_for((bytes + piece - 1) / piece, serial, [&](size_t i) {
      std::memcpy(dst + i * piece, src + i * piece, std::min(piece, bytes - i * piece));
    });
    return;
  }
  parallel_for(height, serial,
               [&](size_t r) { std::memcpy(dst + r * dst_pitch, src + r * src_pitch, width); });
}

}  // namespace fp4moe::detail
