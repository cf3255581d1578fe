// A model on disk, opened: its config and its weights under GGUF-style names, whether it
// came as a GGUF file or a Hugging Face directory (config.json + *.safetensors +
// tokenizer.json). Weight data stays memory-mapped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"

namespace wgrt::model {

struct WeightView {
  std::string name;            // "blk.3.attn_q.weight"
  GgmlType type = GgmlType::F32;  // F32/F16/BF16 for safetensors
  std::vector<uint64_t> dims;  // GGUF order: dims[0] fastest (K of a [N, K] matrix)
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
  // A checkpoint's experts, stored one matrix each: the stacked weight {k, n, n_experts} is these
  // views' rows one after another (data null; n_bytes their sum). Read through weight_to_f32.
  std::vector<WeightView> stacked;
  uint64_t n_elements() const;
};

struct ModelFile {
  std::string path;
  ModelConfig config;
  std::map<std::string, WeightView, std::less<>> weights;
  std::optional<GgufFile> gguf;        // GGUF: also the tokenizer's metadata
  std::optional<StCheckpoint> checkpoint;
  std::string tokenizer_json;          // HF directory: path of tokenizer.json ("" if absent)
  std::shared_ptr<const std::vector<uint8_t>> bytes;  // a model built in memory
};

// `path`: a .gguf file or a Hugging Face model directory. Errors name the file and a hint.
ModelFile open_model(const std::string& path);
// A GGUF image in memory (the built-in default model), named `name` in messages.
ModelFile open_gguf_bytes(std::vector<uint8_t> bytes, const std::string& name);

// The weight `name` with `dims` in GGUF order, or ModelError naming what is wrong.
const WeightView& get_weight(const ModelFile& m, const std::string& name,
                             const std::vector<uint64_t>& dims);
const WeightView* find_weight(const ModelFile& m, const std::string& name);

// The weight as f32 values (dequantized / widened; a stacked weight's parts in turn), for loading
// and tools.
std::vector<float> weight_to_f32(const WeightView& w);

}  // namespace wgrt::model
