#include "support/hf_fixture.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

namespace wgrt::test {

void write_safetensors(const std::string& path, const std::map<std::string, StEntry>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h += ' ';
  std::ofstream f(path, std::ios::binary);
  uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(h.data(), std::streamsize(h.size()));
  for (const auto& [name, t] : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
  if (!f) throw std::runtime_error("write_safetensors: cannot write " + path);
}

std::string temp_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  static std::mt19937 rng(std::random_device{}());
  fs::path p = fs::temp_directory_path() / ("wgrt-" + tag + "-" + std::to_string(rng()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace wgrt::test
