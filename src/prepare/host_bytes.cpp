#include "prepare/host_bytes.hpp"

#include <algorithm>
#include <cstring>

#include "parallel.hpp"

namespace fp4moe::detail {

void parallel_copy_rows(uint8_t* dst, size_t dst_pitch, const uint8_t* src, size_t src_pitch, size_t width,
                        size_t height) {
  if (width == 0 || height == 0) return;
  const int threads = width * height < kParallelCopyMin ? 1 : host_threads();
  if (src_pitch == width && dst_pitch == width) {  // one block: pieces of 1 MiB
    const size_t bytes = width * height, piece = size_t(1) << 20;
    parallel_for(int64_t((bytes + piece - 1) / piece), threads, [&](int64_t i, int) {
      std::memcpy(dst + i * piece, src + i * piece, std::min(piece, bytes - i * piece));
    });
    return;
  }
  parallel_for(int64_t(height), threads,
               [&](int64_t r, int) { std::memcpy(dst + r * dst_pitch, src + r * src_pitch, width); });
}

}  // namespace fp4moe::detail
