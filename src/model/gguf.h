// GGUF reader (versions 2 and 3), memory-mapped, every read bounded.
//
// File layout (little endian):
//   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv × { string key | u32 value_type | value }
//   n_tensors × { string name | u32 n_dims | u64 dims[n_dims] | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (default 32)
//   tensor data; each tensor at data_start + offset (offset aligned)
// string = u64 length + bytes (no NUL). value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32,
// 6 f32, 7 bool, 8 string, 9 array (u32 elem type, u64 count, elems), 10 u64, 11 i64, 12 f64.
// dims[0] is the fastest-varying: a row-major weight [N, K] is stored with dims {K, N}.
//
// A malformed file throws GgufError naming the field, the byte offset and a hint; it never
// reads past the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "model/ggml_types.h"

namespace wgrt::model {

struct GgufError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8,
  Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

struct GgufArray {
  GgufType type = GgufType::U8;
  // Numbers widened (ints to int64/uint64 via their type, floats to double); strings as such.
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  size_t size() const;
};

struct GgufValue {
  GgufType type = GgufType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> v;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] fastest
  uint64_t offset = 0;         // from the data section start
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping
};

struct Mapping;  // the mmap (gguf.cpp)

struct GgufFile {
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;
  std::map<std::string, GgufValue, std::less<>> kv;
  std::vector<GgufTensorInfo> tensors;
  std::shared_ptr<Mapping> mapping;

  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const GgufValue* find(std::string_view key) const;

  // Typed metadata access; a missing key or a wrong type throws GgufError naming the key.
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;  // any integer type, checked >= 0
  double get_float(std::string_view key) const;   // any numeric type
  bool get_bool(std::string_view key) const;
  const GgufArray& get_array(std::string_view key) const;
  std::optional<uint64_t> opt_uint(std::string_view key) const;
  std::optional<double> opt_float(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;
};

// Parses a GGUF file (mmap). Vocab-only files (no tensors) are fine.
GgufFile open_gguf(const std::string& path);
// Parses from memory (tests, fuzzing). The bytes must outlive the result.
GgufFile parse_gguf(std::span<const uint8_t> bytes, const std::string& name = "<memory>");

}  // namespace wgrt::model
