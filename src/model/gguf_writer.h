// wgrt's own GGUF (v3) writer, for test fixtures and tools. Layout as in gguf.h.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace wgrt::model {

struct GgufWriter {
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;  // GGUF order: dims[0] fastest
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv;  // in insertion order
  std::vector<Tensor> tensors;
  uint64_t alignment = 32;
};

void gguf_set(GgufWriter& w, std::string key, GgufValue v);
void gguf_set_u32(GgufWriter& w, std::string key, uint32_t v);
void gguf_set_i32(GgufWriter& w, std::string key, int32_t v);
void gguf_set_f32(GgufWriter& w, std::string key, float v);
void gguf_set_bool(GgufWriter& w, std::string key, bool v);
void gguf_set_string(GgufWriter& w, std::string key, std::string v);
void gguf_set_strings(GgufWriter& w, std::string key, std::vector<std::string> v);
void gguf_set_f32s(GgufWriter& w, std::string key, std::vector<double> v);
void gguf_set_i32s(GgufWriter& w, std::string key, std::vector<int64_t> v);

// `data` must hold the tensor's bytes in `type`'s block layout.
void gguf_add_tensor(GgufWriter& w, std::string name, GgmlType type, std::vector<uint64_t> dims,
                     std::vector<uint8_t> data);

// A tensor whose bytes come later, from gguf_write_file_streamed's `fill` (data stays empty).
void gguf_declare_tensor(GgufWriter& w, std::string name, GgmlType type, std::vector<uint64_t> dims);
uint64_t gguf_tensor_bytes(GgmlType type, const std::vector<uint64_t>& dims);

std::vector<uint8_t> gguf_serialize(const GgufWriter& w);
void gguf_write_file(const GgufWriter& w, const std::string& path);

// For files too big to build in memory (an 8B model in F16 is 16 GB): writes the metadata and
// the tensor table, sizes the file, maps it, and has fill(i, bytes) write tensor i's bytes in
// place (fill may use threads of its own). Tensors added with data are copied as they are.
void gguf_write_file_streamed(const GgufWriter& w, const std::string& path,
                              const std::function<void(size_t tensor, std::span<uint8_t> bytes)>& fill);

}  // namespace wgrt::model
