// One fuzz input, shared by the libFuzzer target (fuzz_safetensors.cpp) and the regression
// test that replays tests/data/fuzz_regressions/ (tests/test_safetensors.cpp).
//
// Input: one mode byte, then the bytes of a .safetensors file.
//   mode & 1 == 0  SafetensorsFile::from_bytes; when it parses, every tensor's bytes and
//                  view are touched and the file is written back with SafetensorsWriter
//                  and re-read, which must give the same tensors and bytes.
//   mode & 1 == 1  the bytes become <dir>/model.safetensors next to a small fixed
//                  config.json (mode & 2: gpt-oss MXFP4, else Qwen3-MoE NVFP4 via
//                  hf_quant_config.json); Checkpoint::open, every view, and, when
//                  FP4MOE_FUZZ_WITH_LOADERS is 1, load_moe_layer(ckpt, 0).
// Anything but fp4moe::Error escaping, or a broken property (__builtin_trap), is a finding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fp4moe/checkpoint.hpp"

#ifndef FP4MOE_FUZZ_WITH_LOADERS
#define FP4MOE_FUZZ_WITH_LOADERS 0
#endif

namespace fp4moe_fuzz {

// H = I = 32, E = 2, k = 1: layer 0 of a model small enough that a valid input is short.
inline const char* kQwenConfig =
    R"({"model_type": "qwen3_moe", "hidden_size": 32, "moe_intermediate_size": 32, "num_experts": 2,
        "num_experts_per_tok": 1, "norm_topk_prob": true, "hidden_act": "silu", "num_hidden_layers": 1})";
inline const char* kQwenQuant = R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16}})";
inline const char* kGptOssConfig =
    R"({"model_type": "gpt_oss", "hidden_size": 32, "intermediate_size": 32, "num_local_experts": 2,
        "num_experts_per_tok": 1, "experts_per_token": 1, "num_hidden_layers": 1,
        "quantization_config": {"quant_method": "mxfp4"}})";

inline void write_file(const std::string& path, const void* p, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  if (n) std::fwrite(p, 1, n, f);
  std::fclose(f);
}

inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Reads every byte of `t` through bytes() and through view(); both must agree.
inline uint64_t touch(const fp4moe::SafetensorsFile& f, const fp4moe::TensorInfo& t) {
  check(f.find(t.name) == &t);
  auto b = f.bytes(t);
  check(b.size() == t.end - t.begin);
  uint64_t sum = 0;
  for (uint8_t x : b) sum += x;
  try {
    fp4moe::TensorView v = f.view(t);
    check(v.nbytes() == b.size() && v.data == b.data());
  } catch (const fp4moe::Error&) {
  }
  return sum;
}

inline void round_trip(const fp4moe::SafetensorsFile& f, const std::string& dir) {
  const std::string path = dir + "/round_trip.safetensors";
  {
    fp4moe::SafetensorsWriter w(path, f.tensors(), f.metadata());
    for (const auto& t : f.tensors()) w.write(t.name, f.bytes(t));
    w.close();
  }
  auto g = fp4moe::SafetensorsFile::open(path);
  check(g.tensors().size() == f.tensors().size() && g.metadata() == f.metadata());
  for (const auto& t : f.tensors()) {
    const fp4moe::TensorInfo* u = g.find(t.name);
    check(u && u->dtype == t.dtype && u->shape == t.shape);
    auto a = f.bytes(t), b = g.bytes(*u);
    check(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()));
  }
}

// `why`, when given, receives the message of the fp4moe::Error that stopped the input.
inline void run(const uint8_t* data, size_t size, const std::string& dir, std::string* why = nullptr) {
  if (size == 0) return;
  const uint8_t mode = data[0];
  ++data;
  --size;
  if ((mode & 1) == 0) {
    try {
      auto f = fp4moe::SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
      volatile uint64_t sink = 0;
      for (const auto& t : f.tensors()) sink = sink + touch(f, t);
      round_trip(f, dir);
    } catch (const fp4moe::Error& e) {
      if (why) *why = e.what();
    }
    return;
  }
  write_file(dir + "/model.safetensors", data, size);
  const bool gpt_oss = mode & 2;
  const char* config = gpt_oss ? kGptOssConfig : kQwenConfig;
  write_file(dir + "/config.json", config, std::char_traits<char>::length(config));
  if (gpt_oss)
    std::remove((dir + "/hf_quant_config.json").c_str());
  else
    write_file(dir + "/hf_quant_config.json", kQwenQuant, std::char_traits<char>::length(kQwenQuant));
  try {
    auto ckpt = fp4moe::Checkpoint::open(dir);
    volatile uint64_t sink = 0;
    for (const auto& name : ckpt.names()) {
      auto [f, t] = ckpt.find(name);
      sink = sink + touch(*f, *t);
    }
#if FP4MOE_FUZZ_WITH_LOADERS
    auto layer = fp4moe::load_moe_layer(ckpt, 0);
    for (const auto& buf : layer.storage)
      for (uint8_t x : buf) sink = sink + x;
#endif
  } catch (const fp4moe::Error& e) {
    if (why) *why = e.what();
  }
}

}  // namespace fp4moe_fuzz
