// Host buffers of the prepared weights, filled in parallel. A checkpoint layer is gigabytes
// (kimi-k2: ~9.5 GB per layer); a std::vector zeroes its bytes on resize, on one thread, and
// those zeros are the pages' first touch (the kernel clears each page then). With elements
// left uninitialized on resize, the first touch is the parallel copy that fills them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// f(i) for i in [0, n): in contiguous slices on up to hardware_concurrency threads (at most 64),
// or all on the caller's thread when `serial`. A slice whose thread cannot start runs on the
// caller's. f must not throw.
void parallel_for(size_t n, bool serial, const std::function<void(size_t)>& f);

// dst[r * dst_pitch, + width) = src[r * src_pitch, + width) for r in [0, height), in contiguous
// slices on up to hardware_concurrency threads when there are many bytes (one thread below
// kParallelCopyMin). The ranges must not overlap.
inline constexpr size_t kParallelCopyMin = size_t(64) << 20;
void parallel_copy_rows(uint8_t* dst, size_t dst_pitch, const uint8_t* src, size_t src_pitch, size_t width,
                        size_t height);

}  // namespace fp4moe::detail
