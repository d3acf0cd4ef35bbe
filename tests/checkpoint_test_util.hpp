// Helpers of the checkpoint tests (test_loaders.cpp, test_quantize_checkpoint.cpp): a
// temporary directory, safetensors files written from raw tensors, and the reference
// backend's output of a layer, which both compare bit for bit. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "fp4moe/checkpoint.hpp"
#include "fp4moe/fp4moe.hpp"

namespace fp4moe::testing {

// A fresh directory under the system temp dir, removed with everything in it.
struct TmpDir {
  std::filesystem::path path;
  TmpDir() {
    path = std::filesystem::temp_directory_path() / ("fp4moe_ckpt_" + std::to_string(std::random_device{}()) + "_" +
                                                     std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path);
  }
  ~TmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TmpDir(const TmpDir&) = delete;
  TmpDir& operator=(const TmpDir&) = delete;
  std::string operator/(const std::string& s) const { return (path / s).string(); }
};

// One tensor of a safetensors file: its dtype string ("BF16", "U8", ...), shape and raw bytes.
struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A safetensors file holding ts, in order.
inline void write_st(const std::string& path, const std::vector<StTensor>& ts) {
  std::vector<TensorInfo> decl;
  for (const auto& t : ts) decl.push_back({t.name, t.dtype, t.shape, 0, 0});
  SafetensorsWriter w(path, decl);
  for (const auto& t : ts) w.write(t.name, t.bytes);
  w.close();
}

inline std::vector<uint8_t> bytes_of(const TensorView& v) {
  const auto* p = static_cast<const uint8_t*>(v.data);
  return {p, p + v.nbytes()};
}

// The reference backend's f32 output [T, hidden] for tokens x (bf16 [T, hidden]) routed by
// ids / tw ([T, top_k]); the output starts as NaN so that a row left unwritten shows.
inline std::vector<float> run_reference(const LayerDesc& d, const CheckpointWeights& w, const std::vector<uint16_t>& x,
                                        const std::vector<int32_t>& ids, const std::vector<float>& tw, int64_t T) {
  PrepareOptions o;
  o.backend = "reference";
  const Layer layer = Layer::prepare(d, w, o);
  std::vector<float> out(size_t(T * d.hidden), std::nanf(""));
  std::vector<uint8_t> ws(std::max<size_t>(layer.workspace_size(T), 1));
  ForwardArgs a;
  a.hidden_states = TensorView::of(x.data(), DType::bf16, {T, d.hidden});
  a.topk_ids = TensorView::of(ids.data(), DType::i32, {T, d.top_k});
  a.topk_weights = TensorView::of(tw.data(), DType::f32, {T, d.top_k});
  a.out = TensorView::of(out.data(), DType::f32, {T, d.hidden});
  if (layer.workspace_size(T)) a.workspace = TensorView::of(ws.data(), DType::u8, {int64_t(ws.size())});
  layer.forward(a);
  return out;
}

// f must throw fp4moe::Error whose message contains every one of parts.
inline void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
  }
}

}  // namespace fp4moe::testing
