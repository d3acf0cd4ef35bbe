// Helpers of the CUDA test suites: GPU presence (tests skip without one), and a device
// buffer with guard bytes on both sides so that every test can prove nothing was
// written outside the buffers it handed in; a scope that forces a process-wide choice (a
// kernel, tile or slice count) and restores it.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "env_test_util.hpp"
#include "fp4moe/fp4moe.hpp"

namespace fp4moe::testing {

inline bool cuda_present() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define FP4MOE_SKIP_WITHOUT_GPU() \
  if (!::fp4moe::testing::cuda_present()) GTEST_SKIP() << "no CUDA device on this machine"

// Throws (GoogleTest reports the message) when a runtime call of the test itself fails.
inline void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("test CUDA call failed: ") + what + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
}
#define TEST_CUDA(call) ::fp4moe::testing::cuda_ok((call), #call)

// Sets a process-wide choice (Set) for its lifetime, then restores the one Get read before.
template <class T, T (*Get)(), void (*Set)(T)>
class ChoiceScope {
 public:
  explicit ChoiceScope(T value) : before_(Get()) { Set(value); }
  ~ChoiceScope() { Set(before_); }
  ChoiceScope(const ChoiceScope&) = delete;

 private:
  T before_;
};

inline int current_device() {
  int d = 0;
  TEST_CUDA(cudaGetDevice(&d));
  return d;
}

// bytes of payload between two 4 KiB guards of 0xA5. The payload starts 4 KiB after a
// cudaMalloc pointer, so it is 256-byte aligned.
class DeviceBuffer {
 public:
  static constexpr size_t kGuard = 4096;
  static constexpr uint8_t kGuardByte = 0xA5;

  explicit DeviceBuffer(size_t bytes, uint8_t fill = 0xFF) : bytes_(bytes) {
    TEST_CUDA(cudaMalloc(&base_, bytes_ + 2 * kGuard));
    TEST_CUDA(cudaMemset(base_, kGuardByte, bytes_ + 2 * kGuard));
    this->fill(fill);  // synchronises
  }
  template <class T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    upload(host);
  }
  ~DeviceBuffer() { (void)cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return static_cast<char*>(base_) + kGuard; }
  template <class T>
  T* as() const { return static_cast<T*>(data()); }
  size_t size() const { return bytes_; }

  // fill and upload complete before returning: the layer runs on non-blocking streams,
  // which do not wait for the legacy stream these calls use.
  void fill(uint8_t b) {
    if (bytes_) TEST_CUDA(cudaMemset(data(), b, bytes_));
    TEST_CUDA(cudaDeviceSynchronize());
  }
  template <class T>
  void upload(const std::vector<T>& host) {
    if (host.size() * sizeof(T) > bytes_) throw std::runtime_error("DeviceBuffer::upload: host vector too large");
    if (!host.empty()) TEST_CUDA(cudaMemcpy(data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize());
  }
  template <class T>
  std::vector<T> download() const {
    TEST_CUDA(cudaDeviceSynchronize());
    std::vector<T> v(bytes_ / sizeof(T));
    if (!v.empty()) TEST_CUDA(cudaMemcpy(v.data(), data(), v.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  TensorView view(DType dt, std::vector<int64_t> shape) const {
    return TensorView::of(data(), dt, shape, DeviceType::cuda, current_device());
  }
  TensorView workspace_view() const {
    if (bytes_ == 0) return TensorView{};
    return TensorView::of(data(), DType::u8, {int64_t(bytes_)}, DeviceType::cuda, current_device());
  }

  // "" when both guards still hold 0xA5 everywhere, else where the first change is.
  std::string guard_damage() const {
    TEST_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> g(kGuard);
    const char* side[2] = {"before", "after"};
    for (int s = 0; s < 2; ++s) {
      const char* p = static_cast<const char*>(base_) + (s == 0 ? 0 : kGuard + bytes_);
      TEST_CUDA(cudaMemcpy(g.data(), p, kGuard, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < kGuard; ++i)
        if (g[i] != kGuardByte) {
          std::ostringstream os;
          os << "guard byte " << (s == 0 ? kGuard - i : i + 1) << " " << side[s] << " the buffer was written (0x"
             << std::hex << int(g[i]) << ")";
          return os.str();
        }
    }
    return "";
  }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fp4moe::testing
