// The public format functions on CUDA tensors against the same functions on host
// tensors, bit for bit: quantize_nvfp4, dequantize_nvfp4, quantize_mxfp4,
// dequantize_mxfp4, swizzle_scales, unswizzle_scales. Inputs hold NaN of both signs,
// infinities, signed zeros, fp32 subnormals, exact e2m1 ties and huge values; shapes are
// odd (1 row, 4-D, K of one block, empty); views start at unaligned (element-aligned)
// addresses so the scalar paths run too; work runs on a non-default stream. The only
// allowed difference: a NaN output of dequantization is NaN on both sides with any
// payload. Fresh random inputs every run; the seed is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "format/quant.hpp"
#include "fp4moe/format.h"

namespace fp4moe::testing {
namespace {

uint64_t fresh_seed() { return (uint64_t(std::random_device{}()) << 32) | std::random_device{}(); }

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A tensor on the device that starts `offset` bytes into its buffer, with sentinel bytes
// before it and (through DeviceBuffer's guards) after it.
class DevTensor {
 public:
  static constexpr uint8_t kPoison = 0xCD;
  DevTensor(const std::vector<uint8_t>& bytes, size_t offset) : offset_(offset), bytes_(bytes.size()),
                                                                 buf_(offset + bytes.size(), kPoison) {
    std::vector<uint8_t> staged(offset, kPoison);
    staged.insert(staged.end(), bytes.begin(), bytes.end());
    buf_.upload(staged);
  }
  DevTensor(size_t bytes, size_t offset) : offset_(offset), bytes_(bytes), buf_(offset + bytes, kPoison) {}

  TensorView view(DType dt, const std::vector<int64_t>& shape) const {
    return TensorView::of(buf_.as<uint8_t>() + offset_, dt, shape, DeviceType::cuda, current_device());
  }
  // The tensor's bytes; fails the test when anything outside them changed.
  std::vector<uint8_t> download() const {
    const std::vector<uint8_t> all = buf_.download<uint8_t>();
    for (size_t i = 0; i < offset_; ++i)
      if (all[i] != kPoison) {
        ADD_FAILURE() << "byte " << offset_ - i << " before the tensor was written";
        break;
      }
    EXPECT_EQ(buf_.guard_damage(), "");
    return {all.begin() + std::ptrdiff_t(offset_), all.begin() + std::ptrdiff_t(offset_ + bytes_)};
  }

 private:
  size_t offset_, bytes_;
  DeviceBuffer buf_;
};

// Runs the work of fn on a fresh non-blocking stream and waits for it: the kernels must
// run on the stream they were given (the legacy stream would not wait for them).
template <class F>
void on_stream(F fn) {
  cudaStream_t s = nullptr;
  TEST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fn(static_cast<void*>(s));
  TEST_CUDA(cudaStreamSynchronize(s));
  TEST_CUDA(cudaStreamDestroy(s));
}

// Activations [rows, K] in blocks of `block` elements with one regime per block: plain
// normals at a random binade, all zeros (signed), NaN of both signs (and a signalling
// one) among normals, an infinity, fp32 subnormals only, exact e2m1 ties times a power of
// two, huge values, a single nonzero element.
std::vector<float> special_rows(int64_t rows, int64_t K, int block, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-30, 30), pick(0, block - 1), regime(0, 8);
  std::uniform_int_distribution<uint32_t> sub(1, 0x7FFFFFu);
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 3.0f};
  std::vector<float> x(size_t(rows * K));
  for (int64_t b = 0; b < rows * K / block; ++b) {
    float* p = x.data() + b * block;
    const float mag = std::ldexp(1.0f, binade(rng));
    for (int i = 0; i < block; ++i) p[i] = nd(rng) * mag;
    switch (regime(rng)) {
      case 1:
        for (int i = 0; i < block; ++i) p[i] = (i & 1) ? -0.0f : 0.0f;
        break;
      case 2:
        p[pick(rng)] = bits_f32(0x7FC00000u);
        p[pick(rng)] = bits_f32(0xFFC00000u);
        p[pick(rng)] = bits_f32(0x7F800001u);
        break;
      case 3:
        p[pick(rng)] = (b & 1) ? -INFINITY : INFINITY;
        break;
      case 4:
        for (int i = 0; i < block; ++i) p[i] = bits_f32(sub(rng) | ((i & 1) ? 0x80000000u : 0u));
        break;
      case 5:
        for (int i = 0; i < block; ++i) p[i] = ties[size_t(i) % 10] * ((i & 2) ? -mag : mag);
        break;
      case 6:
        for (int i = 0; i < block; ++i) p[i] *= 1e30f;
        break;
      case 7:
        for (int i = 0; i < block; ++i) p[i] = 0.0f;
        p[pick(rng)] = nd(rng) * mag;
        break;
      case 8:
        for (int i = 0; i < block; ++i) p[i] = bits_f32(0x7FC00000u);  // all NaN: amax 0
        break;
      default: break;
    }
  }
  return x;
}

// x as dtype dt's bytes (rounded to nearest even, as write_activation does).
std::vector<uint8_t> to_bytes(const std::vector<float>& x, DType dt) {
  std::vector<uint8_t> b(x.size() * dtype_size(dt));
  if (dt == DType::f32) {
    if (!x.empty()) std::memcpy(b.data(), x.data(), b.size());  // NaN payloads kept
    return b;
  }
  for (size_t i = 0; i < x.size(); ++i) detail::write_activation(b.data(), dt, int64_t(i), x[i]);
  return b;
}

void expect_bytes_equal(const char* what, const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < gpu.size(); ++i)
    if (gpu[i] != cpu[i]) {
      ADD_FAILURE() << what << " byte " << i << ": gpu 0x" << std::hex << int(gpu[i]) << ", cpu 0x" << int(cpu[i])
                    << std::dec << " (first mismatch)";
      return;
    }
}

// Equal bits, or NaN on both sides.
void expect_values_equal(const char* what, DType dt, const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  const size_t w = dtype_size(dt);
  for (size_t i = 0; i < gpu.size() / w; ++i) {
    if (std::memcmp(gpu.data() + i * w, cpu.data() + i * w, w) == 0) continue;
    const float g = detail::read_activation(gpu.data(), dt, int64_t(i));
    const float c = detail::read_activation(cpu.data(), dt, int64_t(i));
    if (std::isnan(g) && std::isnan(c)) continue;
    ADD_FAILURE() << what << " element " << i << ": gpu " << g << ", cpu " << c << " (first mismatch)";
    return;
  }
}

const std::vector<std::vector<int64_t>> kNvfp4Shapes = {
    {1, 16}, {3, 48}, {2, 3, 80}, {2, 1, 3, 32}, {37, 7168 / 4 + 16}, {0, 64}, {5, 0, 16}};
const std::vector<std::vector<int64_t>> kMxfp4Shapes = {
    {1, 32}, {5, 96}, {2, 3, 64}, {3, 1, 2, 2880}, {0, 32}};

// Alignment cases: byte offsets of (input, first output, second output) from 256-byte
// aligned addresses. 0: the vector paths; the others: element-aligned only.
struct Offsets {
  size_t in, out1, out2;
};

TEST(CudaFormat, QuantizeNvfp4BitExactWithHost) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& shape : kNvfp4Shapes) {
    const int64_t K = shape.back(), n = numel(shape);
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      for (float gs : {1.0f, 2688.0f / 7.5f, 1e-3f, 3e38f, 1e-38f}) {
        for (Offsets o : {Offsets{0, 0, 0}, Offsets{dtype_size(dt), 1, 3}}) {
          SCOPED_TRACE(shape_string(shape) + " " + dtype_name(dt) + " gs=" + std::to_string(gs) +
                       " offset=" + std::to_string(o.in));
          const std::vector<uint8_t> x = to_bytes(special_rows(n / std::max<int64_t>(K, 1), K, 16, rng), dt);
          std::vector<uint8_t> want_d(size_t(n / 2)), want_s(size_t(n / 16));
          quantize_nvfp4(TensorView::of(x.data(), dt, shape), gs, TensorView::of(want_d.data(), DType::u8, with_last(shape, K / 2)),
                         TensorView::of(want_s.data(), DType::e4m3, with_last(shape, K / 16)));
          DevTensor dx(x, o.in), dd(want_d.size(), o.out1), ds(want_s.size(), o.out2);
          on_stream([&](void* s) {
            quantize_nvfp4(dx.view(dt, shape), gs, dd.view(DType::u8, with_last(shape, K / 2)),
                           ds.view(DType::e4m3, with_last(shape, K / 16)), s);
          });
          expect_bytes_equal("data", dd.download(), want_d);
          expect_bytes_equal("scale", ds.download(), want_s);
        }
      }
    }
  }
}

TEST(CudaFormat, QuantizeMxfp4BitExactWithHost) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& shape : kMxfp4Shapes) {
    const int64_t K = shape.back(), n = numel(shape);
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      for (Offsets o : {Offsets{0, 0, 0}, Offsets{dtype_size(dt), 8, 1}, Offsets{2 * dtype_size(dt), 1, 2}}) {
        SCOPED_TRACE(shape_string(shape) + " " + dtype_name(dt) + " offset=" + std::to_string(o.in));
        const std::vector<uint8_t> x = to_bytes(special_rows(n / K, K, 32, rng), dt);
        std::vector<uint8_t> want_d(size_t(n / 2)), want_s(size_t(n / 32));
        quantize_mxfp4(TensorView::of(x.data(), dt, shape), TensorView::of(want_d.data(), DType::u8, with_last(shape, K / 2)),
                       TensorView::of(want_s.data(), DType::e8m0, with_last(shape, K / 32)));
        DevTensor dx(x, o.in), dd(want_d.size(), o.out1), ds(want_s.size(), o.out2);
        on_stream([&](void* s) {
          quantize_mxfp4(dx.view(dt, shape), dd.view(DType::u8, with_last(shape, K / 2)),
                         ds.view(DType::e8m0, with_last(shape, K / 32)), s);
        });
        expect_bytes_equal("data", dd.download(), want_d);
        expect_bytes_equal("scale", ds.download(), want_s);
      }
    }
  }
}

// Every data byte value, random scale codes with NaN codes, zero, subnormal e4m3 codes
// and the extremes of e8m0 mixed in.
std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng, std::initializer_list<uint8_t> specials) {
  std::uniform_int_distribution<int> byte(0, 255), coin(0, 3);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(byte(rng));
  const std::vector<uint8_t> sp(specials);
  for (size_t i = 0; i < n && !sp.empty(); ++i)
    if (coin(rng) == 0) v[i] = sp[size_t(byte(rng)) % sp.size()];
  return v;
}

TEST(CudaFormat, DequantizeBitExactWithHost) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (bool mx : {false, true}) {
    const int block = mx ? 32 : 16;
    for (const auto& shape : mx ? kMxfp4Shapes : kNvfp4Shapes) {
      const int64_t K = shape.back(), n = numel(shape);
      for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
        for (float dq : {1.0f, 1.0f / 2688.0f, 1e-30f, 1e30f}) {
          if (mx && dq != 1.0f) continue;
          for (Offsets o : {Offsets{0, 0, 0}, Offsets{1, 3, dtype_size(dt)}}) {
            SCOPED_TRACE(std::string(mx ? "mxfp4 " : "nvfp4 ") + shape_string(shape) + " " + dtype_name(dt) +
                         " dq=" + std::to_string(dq) + " offset=" + std::to_string(o.in));
            const std::vector<uint8_t> data = random_bytes(size_t(n / 2), rng, {});
            const std::vector<uint8_t> scale =
                mx ? random_bytes(size_t(n / block), rng, {0x00, 0x01, 0x7F, 0xFE, 0xFF})
                   : random_bytes(size_t(n / block), rng, {0x00, 0x80, 0x01, 0x07, 0x7E, 0x7F, 0xFF, 0xFE});
            const auto dshape = with_last(shape, K / 2), sshape = with_last(shape, K / block);
            const DType sdt = mx ? DType::e8m0 : DType::e4m3;
            std::vector<uint8_t> want(size_t(n) * dtype_size(dt));
            const auto host_out = TensorView::of(want.data(), dt, shape);
            if (mx) dequantize_mxfp4(TensorView::of(data.data(), DType::u8, dshape), TensorView::of(scale.data(), sdt, sshape), host_out);
            else dequantize_nvfp4(TensorView::of(data.data(), DType::u8, dshape), TensorView::of(scale.data(), sdt, sshape), dq, host_out);
            DevTensor dd(data, o.in), ds(scale, o.out1), dout(want.size(), o.out2);
            on_stream([&](void* s) {
              if (mx) dequantize_mxfp4(dd.view(DType::u8, dshape), ds.view(sdt, sshape), dout.view(dt, shape), s);
              else dequantize_nvfp4(dd.view(DType::u8, dshape), ds.view(sdt, sshape), dq, dout.view(dt, shape), s);
            });
            expect_values_equal("out", dt, dout.download(), want);
            expect_bytes_equal("data (input)", dd.download(), data);
            expect_bytes_equal("scale (input)", ds.download(), scale);
          }
        }
      }
    }
  }
}

// Round trips on the device equal the host's (values from the device's own quantization).
TEST(CudaFormat, RoundTripMatchesHost) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> shape = {9, 7, 256};
  const int64_t n = numel(shape);
  const std::vector<uint8_t> x = to_bytes(special_rows(n / 256, 256, 32, rng), DType::bf16);
  const float gs = 2688.0f / 4.0f;
  DevTensor dx(x, 0), dd(size_t(n / 2), 0), ds(size_t(n / 16), 0), dout(size_t(n) * 4, 0);
  on_stream([&](void* s) {
    quantize_nvfp4(dx.view(DType::bf16, shape), gs, dd.view(DType::u8, {9, 7, 128}), ds.view(DType::e4m3, {9, 7, 16}), s);
    dequantize_nvfp4(dd.view(DType::u8, {9, 7, 128}), ds.view(DType::e4m3, {9, 7, 16}), 1.0f / gs,
                     dout.view(DType::f32, shape), s);
  });
  std::vector<uint8_t> d(size_t(n / 2)), sc(size_t(n / 16)), out(size_t(n) * 4);
  quantize_nvfp4(TensorView::of(x.data(), DType::bf16, shape), gs, TensorView::of(d.data(), DType::u8, {9, 7, 128}),
                 TensorView::of(sc.data(), DType::e4m3, {9, 7, 16}));
  dequantize_nvfp4(TensorView::of(d.data(), DType::u8, {9, 7, 128}), TensorView::of(sc.data(), DType::e4m3, {9, 7, 16}),
                   1.0f / gs, TensorView::of(out.data(), DType::f32, shape));
  expect_values_equal("round trip", DType::f32, dout.download(), out);
}

TEST(CudaFormat, SwizzleBitExactWithHostAndRoundTrips) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<std::vector<int64_t>> shapes = {{1, 1},      {127, 3},    {128, 4},   {129, 5},
                                                    {2, 300, 17}, {2, 3, 130, 7}, {3, 0, 4}, {3, 5, 0}};
  for (const auto& shape : shapes) {
    for (DType dt : {DType::u8, DType::e4m3, DType::e8m0}) {
      for (Offsets o : {Offsets{0, 0, 0}, Offsets{3, 1, 5}}) {
        SCOPED_TRACE(shape_string(shape) + " " + dtype_name(dt) + " offset=" + std::to_string(o.in));
        const int64_t R = shape[shape.size() - 2], C = shape.back();
        std::vector<int64_t> sw_shape(shape.begin(), shape.end() - 1);
        sw_shape.back() = swizzle_pad_rows(R) * swizzle_pad_cols(C);
        const std::vector<uint8_t> scale = random_bytes(size_t(numel(shape)), rng, {0x00, 0xFF});
        std::vector<uint8_t> want(size_t(numel(sw_shape)), 0x5A);
        swizzle_scales(TensorView::of(scale.data(), dt, shape), TensorView::of(want.data(), DType::u8, sw_shape));
        DevTensor ds(scale, o.in), dsw(want.size(), o.out1), dback(scale.size(), o.out2);
        on_stream([&](void* s) {
          swizzle_scales(ds.view(dt, shape), dsw.view(DType::u8, sw_shape), s);
          unswizzle_scales(dsw.view(DType::u8, sw_shape), dback.view(dt, shape), s);
        });
        expect_bytes_equal("swizzled (padding 0)", dsw.download(), want);
        expect_bytes_equal("unswizzled", dback.download(), scale);
      }
    }
  }
}

// A bad call on the device is refused before any kernel runs and writes nothing.
TEST(CudaFormat, BadArgumentsWriteNothing) {
  FP4MOE_SKIP_WITHOUT_GPU();
  DevTensor dx(std::vector<uint8_t>(4 * 64 * 4, 0), 0), dd(4 * 32, 0), ds(4 * 4, 0);
  EXPECT_THROW(quantize_nvfp4(dx.view(DType::f32, {4, 64}), 1.0f, dd.view(DType::u8, {4, 32}),
                              ds.view(DType::e4m3, {4, 3})),
               Error);
  EXPECT_THROW(quantize_nvfp4(dx.view(DType::f32, {4, 64}), 0.0f, dd.view(DType::u8, {4, 32}),
                              ds.view(DType::e4m3, {4, 4})),
               Error);
  EXPECT_THROW(quantize_mxfp4(dx.view(DType::f32, {4, 64}), dd.view(DType::u8, {4, 32}), ds.view(DType::e8m0, {4, 4})),
               Error);
  for (uint8_t b : dd.download()) ASSERT_EQ(b, DevTensor::kPoison);
  for (uint8_t b : ds.download()) ASSERT_EQ(b, DevTensor::kPoison);
}

}  // namespace
}  // namespace fp4moe::testing
