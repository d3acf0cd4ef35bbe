// fp4moe/checkpoint.hpp — reading and writing checkpoints (safetensors), and gathering one
// MoE layer of a real model into the checkpoint layout of SPEC §3.
//
// Every reader validates the file before use (header length, JSON, offsets, sizes, dtypes,
// shapes, overlaps, names) and throws fp4moe::Error(invalid_argument) naming the file and
// the tensor; a hostile file never crashes the process or reads out of bounds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4moe/fp4moe.hpp"

namespace fp4moe {

// ---------------------------------------------------------------------------
// safetensors: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "U8", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to the data section.
// ---------------------------------------------------------------------------
struct TensorInfo {
  std::string name;
  std::string dtype;            // safetensors name: "U8", "I8", "I32", "I64", "F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "BOOL", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

// Bytes per element of a safetensors dtype name; 0 for an unknown name.
size_t safetensors_dtype_size(std::string_view dtype);

// One memory-mapped .safetensors file (read-only, zero-copy).
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // Parse from memory (the fuzzer and tests); `name` is used in messages.
  static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, const std::string& name);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const;
  const std::vector<TensorInfo>& tensors() const;          // in file order of data_offsets
  const TensorInfo* find(std::string_view name) const;     // nullptr if absent
  const TensorInfo& at(std::string_view name) const;       // throws naming file and tensor
  const std::map<std::string, std::string>& metadata() const;
  std::span<const uint8_t> bytes(const TensorInfo& t) const;
  // A host TensorView over the mapped bytes; throws for dtypes fp4moe has no DType for, or
  // more than 4 dims. F8_E4M3 -> e4m3, F8_E8M0 -> e8m0, U8 -> u8, I32, F32, F16, BF16.
  TensorView view(const TensorInfo& t) const;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A checkpoint directory: model.safetensors, or shards listed by model.safetensors.index.json
// ({"weight_map": {"name": "model-00001-of-00002.safetensors", ...}}), or every
// *.safetensors file when neither is present. Files open lazily.
class Checkpoint {
 public:
  static Checkpoint open(const std::string& dir);
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::string& dir() const;
  std::vector<std::string> names() const;                  // every tensor, sorted
  bool has(std::string_view name) const;
  // The file holding `name` and its info; throws naming the checkpoint and tensor if absent.
  std::pair<const SafetensorsFile*, const TensorInfo*> find(std::string_view name) const;
  TensorView view(std::string_view name) const;
  // config.json / hf_quant_config.json as raw JSON text ("" when absent).
  std::string read_text(const std::string& file) const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming writer: declare every tensor first (the header is written up front), then
// write each tensor's bytes in declaration order; memory stays bounded by one tensor.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::vector<TensorInfo>& tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  void write(std::string_view name, std::span<const uint8_t> bytes);  // in declaration order
  void close();                                                       // checks all were written

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// One MoE layer of a real checkpoint, gathered into SPEC §3's layout.
// ---------------------------------------------------------------------------
struct LoadedLayer {
  std::string model_type;        // config.json "model_type" (deepseek_v3, kimi_k2, qwen3_moe, gpt_oss, mixtral)
  LayerDesc desc;                // H, I, E, k, formats, activation, routing from the configs
  CheckpointWeights weights;     // views into `storage` (host)
  TensorView router_weight;      // [E, H] bf16|f32 (the gate's linear weight)
  TensorView router_bias;        // [E] bf16|f32, optional: added to the logits (gpt-oss router)
  TensorView correction_bias;    // [E] f32, optional: selection bias of sigmoid_grouped (e_score_correction_bias)
  std::vector<std::vector<uint8_t>> storage;  // owns every gathered buffer
};
LoadedLayer load_moe_layer(const Checkpoint& ckpt, int layer);

}  // namespace fp4moe
