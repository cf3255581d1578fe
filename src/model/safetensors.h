// safetensors reader (Hugging Face checkpoints), memory-mapped, every read bounded.
//
// File layout: u64 header_size (little endian) | header_size bytes of JSON |
// tensor data. The JSON maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end)} (offsets relative to the data start); "__metadata__" is optional.
// A sharded checkpoint lists name -> file in model.safetensors.index.json ("weight_map").
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace wgrt::model {

struct SafetensorsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class StDtype : uint8_t { F32, F16, BF16 };
const char* st_dtype_name(StDtype t);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<uint64_t> shape;  // row-major, outermost first
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
  std::string file;
};

struct Mapping;

struct StCheckpoint {
  std::vector<StTensor> tensors;
  std::vector<std::shared_ptr<Mapping>> mappings;
  const StTensor* find(std::string_view name) const;
};

// One .safetensors file.
StCheckpoint open_safetensors(const std::string& path);
// A directory: model.safetensors, or the shards named by model.safetensors.index.json.
StCheckpoint open_safetensors_dir(const std::string& dir);

}  // namespace wgrt::model
