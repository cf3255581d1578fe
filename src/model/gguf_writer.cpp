#include "model/gguf_writer.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace wgrt::model {

void gguf_set(GgufWriter& w, std::string key, GgufValue v) {
  for (auto& [k, old] : w.kv)
    if (k == key) {
      old = std::move(v);
      return;
    }
  w.kv.emplace_back(std::move(key), std::move(v));
}

void gguf_set_u32(GgufWriter& w, std::string key, uint32_t v) {
  gguf_set(w, std::move(key), GgufValue{GgufType::U32, uint64_t(v)});
}
void gguf_set_i32(GgufWriter& w, std::string key, int32_t v) {
  gguf_set(w, std::move(key), GgufValue{GgufType::I32, int64_t(v)});
}
void gguf_set_f32(GgufWriter& w, std::string key, float v) {
  gguf_set(w, std::move(key), GgufValue{GgufType::F32, double(v)});
}
void gguf_set_bool(GgufWriter& w, std::string key, bool v) {
  gguf_set(w, std::move(key), GgufValue{GgufType::Bool, v});
}
void gguf_set_string(GgufWriter& w, std::string key, std::string v) {
  gguf_set(w, std::move(key), GgufValue{GgufType::String, std::move(v)});
}
void gguf_set_strings(GgufWriter& w, std::string key, std::vector<std::string> v) {
  GgufArray a;
  a.type = GgufType::String;
  a.strings = std::move(v);
  gguf_set(w, std::move(key), GgufValue{GgufType::Array, std::move(a)});
}
void gguf_set_f32s(GgufWriter& w, std::string key, std::vector<double> v) {
  GgufArray a;
  a.type = GgufType::F32;
  a.floats = std::move(v);
  gguf_set(w, std::move(key), GgufValue{GgufType::Array, std::move(a)});
}
void gguf_set_i32s(GgufWriter& w, std::string key, std::vector<int64_t> v) {
  GgufArray a;
  a.type = GgufType::I32;
  a.ints = std::move(v);
  gguf_set(w, std::move(key), GgufValue{GgufType::Array, std::move(a)});
}

uint64_t gguf_tensor_bytes(GgmlType type, const std::vector<uint64_t>& dims) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  uint64_t n = 1;
  for (auto d : dims) n *= d;
  if (!info || dims.empty() || dims[0] % info->block_elems)
    throw std::invalid_argument(fmt::format("a {} tensor cannot have {} elements per row",
                                            ggml_type_name(uint32_t(type)), dims.empty() ? 0 : dims[0]));
  return n / info->block_elems * info->block_bytes;
}

void gguf_add_tensor(GgufWriter& w, std::string name, GgmlType type, std::vector<uint64_t> dims,
                     std::vector<uint8_t> data) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  uint64_t n = 1;
  for (auto d : dims) n *= d;
  if (!info || dims.empty() || dims[0] % info->block_elems ||
      data.size() != n / info->block_elems * info->block_bytes)
    throw std::invalid_argument(fmt::format("gguf_add_tensor '{}': {} bytes do not match {} of {} elements",
                                            name, data.size(), ggml_type_name(uint32_t(type)), n));
  w.tensors.push_back({std::move(name), type, std::move(dims), std::move(data)});
}

void gguf_declare_tensor(GgufWriter& w, std::string name, GgmlType type, std::vector<uint64_t> dims) {
  try {
    (void)gguf_tensor_bytes(type, dims);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("gguf_declare_tensor '{}': {}", name, e.what()));
  }
  w.tensors.push_back({std::move(name), type, std::move(dims), {}});
}

namespace {

struct Out {
  std::vector<uint8_t> bytes;
  template <class T>
  void put(T v) {
    size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
  }
};

void put_scalar(Out& o, GgufType t, int64_t i, double f) {
  switch (t) {
    case GgufType::U8: o.put<uint8_t>(uint8_t(i)); break;
    case GgufType::I8: o.put<int8_t>(int8_t(i)); break;
    case GgufType::U16: o.put<uint16_t>(uint16_t(i)); break;
    case GgufType::I16: o.put<int16_t>(int16_t(i)); break;
    case GgufType::U32: o.put<uint32_t>(uint32_t(i)); break;
    case GgufType::I32: o.put<int32_t>(int32_t(i)); break;
    case GgufType::U64: o.put<uint64_t>(uint64_t(i)); break;
    case GgufType::I64: o.put<int64_t>(i); break;
    case GgufType::Bool: o.put<uint8_t>(i ? 1 : 0); break;
    case GgufType::F32: o.put<float>(float(f)); break;
    case GgufType::F64: o.put<double>(f); break;
    default: throw std::logic_error("put_scalar: not a scalar type");
  }
}

void put_value(Out& o, const GgufValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          o.put_string(x);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          o.put<uint32_t>(uint32_t(x.type));
          o.put<uint64_t>(x.size());
          if (x.type == GgufType::String)
            for (const auto& s : x.strings) o.put_string(s);
          else if (x.type == GgufType::F32 || x.type == GgufType::F64)
            for (double f : x.floats) put_scalar(o, x.type, 0, f);
          else
            for (int64_t i : x.ints) put_scalar(o, x.type, i, 0);
        } else if constexpr (std::is_same_v<T, double>) {
          put_scalar(o, v.type, 0, x);
        } else {
          put_scalar(o, v.type, int64_t(x), 0);
        }
      },
      v.v);
}

}  // namespace

namespace {

uint64_t aligned(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Tensors added with data keep their bytes as given (tests write malformed files that way).
uint64_t data_bytes(const GgufWriter::Tensor& t) {
  return t.data.empty() ? gguf_tensor_bytes(t.type, t.dims) : t.data.size();
}

// Everything before the tensor data, padded to the alignment.
Out serialize_header(const GgufWriter& w) {
  Out o;
  o.put<uint32_t>(0x46554747u);
  o.put<uint32_t>(3);
  o.put<uint64_t>(w.tensors.size());
  bool has_alignment = false;
  for (const auto& [k, v] : w.kv) has_alignment |= k == "general.alignment";
  o.put<uint64_t>(w.kv.size() + (w.alignment != 32 && !has_alignment ? 1 : 0));
  for (const auto& [k, v] : w.kv) {
    o.put_string(k);
    o.put<uint32_t>(uint32_t(v.type));
    put_value(o, v);
  }
  if (w.alignment != 32 && !has_alignment) {
    o.put_string("general.alignment");
    o.put<uint32_t>(uint32_t(GgufType::U32));
    o.put<uint32_t>(uint32_t(w.alignment));
  }
  uint64_t offset = 0;
  for (const auto& t : w.tensors) {
    o.put_string(t.name);
    o.put<uint32_t>(uint32_t(t.dims.size()));
    for (auto d : t.dims) o.put<uint64_t>(d);
    o.put<uint32_t>(uint32_t(t.type));
    o.put<uint64_t>(offset);
    offset += aligned(data_bytes(t), w.alignment);
  }
  o.pad_to(w.alignment);
  return o;
}

}  // namespace

std::vector<uint8_t> gguf_serialize(const GgufWriter& w) {
  Out o = serialize_header(w);
  for (const auto& t : w.tensors) {
    if (t.data.empty() && gguf_tensor_bytes(t.type, t.dims) != 0)
      throw std::logic_error(fmt::format("gguf_serialize: tensor '{}' was only declared (hint: "
                                         "gguf_write_file_streamed fills declared tensors)", t.name));
    o.bytes.insert(o.bytes.end(), t.data.begin(), t.data.end());
    o.pad_to(w.alignment);
  }
  return o.bytes;
}

void gguf_write_file(const GgufWriter& w, const std::string& path) {
  std::vector<uint8_t> bytes = gguf_serialize(w);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open for writing", path));
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) throw std::runtime_error(fmt::format("{}: write failed", path));
}

void gguf_write_file_streamed(const GgufWriter& w, const std::string& path,
                              const std::function<void(size_t, std::span<uint8_t>)>& fill) {
  const std::vector<uint8_t> header = serialize_header(w).bytes;
  uint64_t size = header.size();
  for (const auto& t : w.tensors) size += aligned(data_bytes(t), w.alignment);
  auto fail = [&](const char* what) {
    return std::runtime_error(fmt::format("{}: {} failed: {} (hint: is there {:.1f} GiB free?)", path, what,
                                          std::strerror(errno), size / 1073741824.0));
  };
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
  if (::ftruncate(fd, off_t(size)) != 0) {
    auto e = fail("ftruncate");
    ::close(fd);
    throw e;
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    auto e = fail("mmap");
    ::close(fd);
    throw e;
  }
  auto* base = static_cast<uint8_t*>(p);
  std::memcpy(base, header.data(), header.size());  // the padding stays zero, as ftruncate left it
  uint64_t at = header.size();
  try {
    for (size_t i = 0; i < w.tensors.size(); ++i) {
      const auto& t = w.tensors[i];
      const uint64_t n = data_bytes(t);
      if (t.data.empty()) fill(i, {base + at, n});
      else std::memcpy(base + at, t.data.data(), n);
      at += aligned(n, w.alignment);
    }
  } catch (...) {
    ::munmap(p, size);
    ::close(fd);
    throw;
  }
  const bool synced = ::munmap(p, size) == 0;
  if (!synced || ::close(fd) != 0) throw fail("writing back");
}

}  // namespace wgrt::model
