// Writes a Hugging Face style model directory (config.json + safetensors) for tests.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wgrt::test {

struct StEntry {
  std::string dtype;  // "F32", "F16", "BF16"
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes `tensors` into one safetensors file.
void write_safetensors(const std::string& path, const std::map<std::string, StEntry>& tensors);

// A fresh empty directory under the system temp dir.
std::string temp_dir(const std::string& tag);

}  // namespace wgrt::test
