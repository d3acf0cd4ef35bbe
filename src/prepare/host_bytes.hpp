// Host buffers of the prepared weights, filled in parallel. A checkpoint layer is gigabytes
// (kimi-k2: ~9.5 GB per layer); a std::vector zeroes its bytes on resize, on one thread, and
// those zeros are the pages' first touch (the kernel clears each page then). With elements
// left uninitialized on resize, the first touch is the parallel copy that fills them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace fp4moe::detail {

// std::allocator, except that resize() default-initializes (for bytes and words: leaves them
// as they are) instead of zeroing. The caller writes every element before reading it.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  static_assert(std::is_trivially_default_constructible_v<T>, "for trivial elements only");
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using HostArray = std::vector<T, DefaultInitAllocator<T>>;
using HostBytes = HostArray<uint8_t>;

// dst[r * dst_pitch, + width) = src[r * src_pitch, + width) for r in [0, height): in 1 MiB
// pieces (or rows) on host_threads() threads (parallel.hpp) when there are many bytes, on one
// below kParallelCopyMin. The ranges must not overlap.
inline constexpr size_t kParallelCopyMin = size_t(64) << 20;
void parallel_copy_rows(uint8_t* dst, size_t dst_pitch, const uint8_t* src, size_t src_pitch, size_t width,
                        size_t height);

}  // namespace fp4moe::detail
