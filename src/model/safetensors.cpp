#include "model/safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "model/mapped_file.h"
#include "model/shape.h"

namespace wgrt::model {

const char* st_dtype_name(StDtype t) {
  switch (t) {
    case StDtype::F32: return "F32";
    case StDtype::F16: return "F16";
    case StDtype::BF16: return "BF16";
  }
  return "?";
}

const StTensor* StCheckpoint::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what, const std::string& hint) {
  throw SafetensorsError(fmt::format("{}: {} (hint: {})", file, what, hint));
}

// Past any real tensor's dim (the largest are ~2^18).
constexpr uint64_t kMaxDim = uint64_t(1) << 40;

// `seen`: the names of the checkpoint's tensors so far (a lookup per tensor keeps the duplicate
// check across shards at n log n; ordered, so crafted hash collisions cannot slow it).
void parse_file(const std::string& path, StCheckpoint& ck, std::set<std::string, std::less<>>& seen) {
  std::shared_ptr<Mapping> m;
  try {
    m = map_file(path);
  } catch (const std::runtime_error& e) {
    throw SafetensorsError(e.what());
  }
  const uint8_t* base = m->bytes();
  const size_t size = m->size;
  if (size < 8) fail(path, fmt::format("{} bytes is too short for the header size at offset 0", size), "the file is truncated");
  uint64_t header = 0;
  std::memcpy(&header, base, 8);
  if (header > size - 8 || header > (uint64_t(100) << 20))
    fail(path, fmt::format("header size {} at offset 0 exceeds the file ({} bytes) or 100 MiB", header, size),
         "the file is truncated or not safetensors");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(base + 8, base + 8 + header);
  } catch (const nlohmann::json::exception& e) {
    fail(path, fmt::format("header JSON at offset 8 does not parse: {}", e.what()), "the file is corrupt");
  }
  if (!j.is_object()) fail(path, "header at offset 8 is not a JSON object", "the file is corrupt");
  const uint64_t data_start = 8 + header;
  const uint64_t data_size = size - data_start;
  for (auto& [name, info] : j.items()) {
    if (name == "__metadata__") continue;
    std::string where = fmt::format("tensor '{}'", name);
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      fail(path, where + " lacks dtype, shape or data_offsets", "the header is corrupt");
    StTensor t;
    t.name = name;
    t.file = path;
    std::string dtype = info["dtype"].is_string() ? info["dtype"].get<std::string>() : "?";
    size_t elem = 0;
    if (dtype == "F32") t.dtype = StDtype::F32, elem = 4;
    else if (dtype == "F16") t.dtype = StDtype::F16, elem = 2;
    else if (dtype == "BF16") t.dtype = StDtype::BF16, elem = 2;
    else fail(path, fmt::format("{} has dtype {}", where, dtype), "wgrt loads F32, F16 and BF16 checkpoints");
    if (!info["shape"].is_array() || info["shape"].size() > 4)
      fail(path, where + " shape is not an array of at most 4 dims", "the header is corrupt");
    for (auto& d : info["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxDim)
        fail(path, fmt::format("{} dim {} is {}, not an integer from 0 to 2^40", where, t.shape.size(), d.dump()),
             "the header is corrupt");
      t.shape.push_back(d.get<uint64_t>());
    }
    // Checked products: a shape whose byte size wraps 64 bits must not pass for a small one.
    const std::optional<uint64_t> n = shape_elements(t.shape);
    const std::optional<uint64_t> n_bytes = n ? checked_mul(*n, elem) : std::nullopt;
    if (!n_bytes)
      fail(path, fmt::format("{} of shape {} ({}) takes more than 2^64 bytes", where, shape_str(t.shape), dtype),
           "the header is corrupt");
    auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, where + " data_offsets is not [begin, end]", "the header is corrupt");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      fail(path, fmt::format("{} data [{}, {}) runs past the {} data bytes", where, b, e, data_size),
           "the file is truncated");
    if (e - b != *n_bytes)
      fail(path, fmt::format("{} holds {} bytes, but shape {} of {} needs {}", where, e - b, shape_str(t.shape), dtype,
                             *n_bytes),
           "the header is corrupt");
    t.data = base + data_start + b;
    t.n_bytes = e - b;
    if (!seen.insert(name).second) fail(path, where + " appears twice in the checkpoint", "the shards overlap");
    ck.tensors.push_back(std::move(t));
  }
  ck.mappings.push_back(std::move(m));
}

}  // namespace

StCheckpoint open_safetensors(const std::string& path) {
  StCheckpoint ck;
  std::set<std::string, std::less<>> seen;
  parse_file(path, ck, seen);
  return ck;
}

StCheckpoint open_safetensors_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  StCheckpoint ck;
  std::set<std::string, std::less<>> seen;
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw SafetensorsError(fmt::format("{}: does not parse: {} (hint: the index file is corrupt)", index.string(), e.what()));
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw SafetensorsError(fmt::format("{}: no \"weight_map\" object (hint: the index file is corrupt)", index.string()));
    std::set<std::string> shards;
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        throw SafetensorsError(fmt::format("{}: weight_map['{}'] is not a file name in the directory", index.string(), name));
      shards.insert(file.get<std::string>());
    }
    for (const auto& s : shards) parse_file((fs::path(dir) / s).string(), ck, seen);
    for (auto& [name, file] : j["weight_map"].items())
      if (!seen.count(name))
        throw SafetensorsError(fmt::format("{}: '{}' is listed in {} but not found there", index.string(), name,
                                           file.get<std::string>()));
    return ck;
  }
  fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(single))
    throw SafetensorsError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json "
                                       "(hint: point -m at a Hugging Face model directory)", dir));
  parse_file(single.string(), ck, seen);
  return ck;
}

}  // namespace wgrt::model
