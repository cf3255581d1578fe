#include "model/gguf.h"

#include <fmt/format.h>

#include <cstring>
#include <string_view>

#include "model/mapped_file.h"
#include "model/shape.h"

namespace wgrt::model {

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "?";
}

size_t GgufArray::size() const {
  return type == GgufType::String ? strings.size()
         : (type == GgufType::F32 || type == GgufType::F64) ? floats.size()
                                                             : ints.size();
}

namespace {

// A bounded little-endian reader that names what it was reading when it runs out.
struct Cursor {
  const uint8_t* base;
  size_t size;
  size_t pos = 0;
  const std::string& file;

  [[noreturn]] void fail(const std::string& field, const std::string& problem,
                         const std::string& hint) const {
    throw GgufError(fmt::format("{}: {} at byte offset {}: {} (hint: {})", file, field, pos, problem, hint));
  }
  void need(size_t n, const std::string& field) const {
    if (n > size - pos)
      fail(field, fmt::format("needs {} bytes but only {} remain", n, size - pos),
           "the file is truncated or this field's length is corrupt");
  }
  template <class T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, base + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& field) {
    uint64_t len = read<uint64_t>(field + " (length)");
    if (len > size - pos)
      fail(field, fmt::format("string length {} exceeds the {} bytes left", len, size - pos),
           "the file is truncated or corrupt");
    std::string s(reinterpret_cast<const char*>(base + pos), size_t(len));
    pos += size_t(len);
    return s;
  }
};

size_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::String: return 8;
    case GgufType::Array: return 12;
  }
  return 1;
}

bool known_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// Past any real tensor (the largest are ~2^31 elements), low enough that sizes derived from
// a tensor's element count stay far from overflow.
constexpr uint64_t kMaxTensorElements = uint64_t(1) << 50;

// One scalar, widened: ints to int64 (u64 kept as bits), floats to double.
void read_scalar(Cursor& c, GgufType t, const std::string& field, int64_t& i, double& f) {
  switch (t) {
    case GgufType::U8: i = c.read<uint8_t>(field); break;
    case GgufType::I8: i = c.read<int8_t>(field); break;
    case GgufType::U16: i = c.read<uint16_t>(field); break;
    case GgufType::I16: i = c.read<int16_t>(field); break;
    case GgufType::U32: i = c.read<uint32_t>(field); break;
    case GgufType::I32: i = c.read<int32_t>(field); break;
    case GgufType::U64: i = int64_t(c.read<uint64_t>(field)); break;
    case GgufType::I64: i = c.read<int64_t>(field); break;
    case GgufType::Bool: {
      uint8_t b = c.read<uint8_t>(field);
      if (b > 1) c.fail(field, fmt::format("bool value {}", b), "a bool is 0 or 1");
      i = b;
      break;
    }
    case GgufType::F32: f = c.read<float>(field); break;
    case GgufType::F64: f = c.read<double>(field); break;
    default: break;
  }
}

GgufValue read_value(Cursor& c, GgufType t, const std::string& field) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::String: v.v = c.read_string(field); break;
    case GgufType::Array: {
      uint32_t et = c.read<uint32_t>(field + " (array element type)");
      if (!known_type(et))
        c.fail(field, fmt::format("unknown array element type {}", et), "types are 0..12");
      if (GgufType(et) == GgufType::Array)
        c.fail(field, "nested array", "wgrt reads arrays of scalars or strings only");
      uint64_t n = c.read<uint64_t>(field + " (array length)");
      size_t elem = min_encoded_size(GgufType(et));
      if (n > (c.size - c.pos) / elem)
        c.fail(field, fmt::format("array of {} {} cannot fit in the {} bytes left", n,
                                  gguf_type_name(GgufType(et)), c.size - c.pos),
               "the file is truncated or the array length is corrupt");
      GgufArray a;
      a.type = GgufType(et);
      if (a.type == GgufType::String) {
        a.strings.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) a.strings.push_back(c.read_string(field + fmt::format("[{}]", k)));
      } else if (a.type == GgufType::F32 || a.type == GgufType::F64) {
        a.floats.resize(size_t(n));
        int64_t unused = 0;
        for (uint64_t k = 0; k < n; ++k) read_scalar(c, a.type, field, unused, a.floats[k]);
      } else {
        a.ints.resize(size_t(n));
        double unused = 0;
        for (uint64_t k = 0; k < n; ++k) read_scalar(c, a.type, field, a.ints[k], unused);
      }
      v.v = std::move(a);
      break;
    }
    case GgufType::F32: case GgufType::F64: {
      int64_t i = 0;
      double f = 0;
      read_scalar(c, t, field, i, f);
      v.v = f;
      break;
    }
    case GgufType::Bool: {
      int64_t i = 0;
      double f = 0;
      read_scalar(c, t, field, i, f);
      v.v = i != 0;
      break;
    }
    case GgufType::U8: case GgufType::U16: case GgufType::U32: case GgufType::U64: {
      int64_t i = 0;
      double f = 0;
      read_scalar(c, t, field, i, f);
      v.v = uint64_t(i);
      break;
    }
    default: {
      int64_t i = 0;
      double f = 0;
      read_scalar(c, t, field, i, f);
      v.v = i;
      break;
    }
  }
  return v;
}

GgufFile parse(const uint8_t* base, size_t size, const std::string& name) {
  GgufFile f;
  f.path = name;
  Cursor c{base, size, 0, name};
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != 0x46554747u) {
    c.pos = 0;
    c.fail("magic", fmt::format("found 0x{:08x}, not \"GGUF\"", magic), "this is not a GGUF file");
  }
  f.version = c.read<uint32_t>("version");
  if (f.version != 2 && f.version != 3) {
    c.pos = 4;
    c.fail("version", fmt::format("version {} is not supported", f.version),
           "wgrt reads GGUF v2 and v3; convert older files with a current converter");
  }
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each kv takes at least 8 + 4 + 1 bytes, each tensor info at least 8 + 4 + 4 + 8.
  if (n_kv > (size - c.pos) / 13)
    c.fail("metadata count", fmt::format("{} entries cannot fit in the file", n_kv), "the header is corrupt");
  if (n_tensors > (size - c.pos) / 24)
    c.fail("tensor count", fmt::format("{} tensors cannot fit in the file", n_tensors), "the header is corrupt");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string(fmt::format("metadata key #{}", i));
    uint32_t t = c.read<uint32_t>(fmt::format("type of '{}'", key));
    if (!known_type(t))
      c.fail(fmt::format("type of '{}'", key), fmt::format("unknown value type {}", t), "types are 0..12");
    GgufValue v = read_value(c, GgufType(t), fmt::format("value of '{}'", key));
    if (!f.kv.emplace(key, std::move(v)).second)
      c.fail(fmt::format("metadata key '{}'", key), "appears twice", "the file is corrupt");
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    const uint64_t* al = std::get_if<uint64_t>(&a->v);
    if (!al || *al == 0 || (*al & (*al - 1)) != 0 || *al > 65536)
      throw GgufError(fmt::format("{}: general.alignment must be a power of two up to 65536", name));
    f.alignment = *al;
  }

  // Tensor names seen so far (views into the file), each with its index: a lookup per tensor
  // keeps the duplicate check at n log n comparisons. Ordered rather than hashed, so that names
  // crafted to collide under std::hash (a fixed-seed MurmurHash) cannot make it quadratic.
  std::map<std::string_view, uint64_t> seen;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    const size_t name_at = c.pos;
    t.name = c.read_string(fmt::format("tensor #{} name", i));
    if (auto [it, fresh] = seen.try_emplace(std::string_view(reinterpret_cast<const char*>(base + name_at + 8),
                                                             t.name.size()), i);
        !fresh) {
      c.pos = name_at;
      c.fail(fmt::format("tensor #{} '{}'", i, t.name), fmt::format("name appears twice (first as tensor #{})", it->second),
             "the file is corrupt");
    }
    std::string field = fmt::format("tensor '{}'", t.name);
    uint32_t n_dims = c.read<uint32_t>(field + " dim count");
    if (n_dims == 0 || n_dims > 4)
      c.fail(field + " dim count", fmt::format("{} dims", n_dims), "tensors have 1 to 4 dims");
    const size_t dims_at = c.pos;
    for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(c.read<uint64_t>(fmt::format("{} dim {}", field, d)));
    // The whole shape is read first, so a refusal shows all of it.
    const std::optional<uint64_t> n = shape_elements(t.dims);
    bool zero = false;
    for (uint64_t d : t.dims) zero = zero || d == 0;
    if (zero || !n || *n > kMaxTensorElements) {
      c.pos = dims_at;
      c.fail(field + " shape", fmt::format("{} {}", shape_str(t.dims), zero ? "has a zero dim" : !n ? "overflows 64 bits"
                                                                          : fmt::format("has {} elements", *n)),
             "dims are non-zero and a tensor has fewer than 2^50 elements; the file is corrupt");
    }
    t.n_elements = *n;
    uint32_t type = c.read<uint32_t>(field + " type");
    const GgmlTypeInfo* info = ggml_type_info(type);
    if (!info)
      c.fail(field + " type", fmt::format("unknown ggml type {}", type), "the file is corrupt or newer than wgrt");
    t.type = GgmlType(type);
    if (t.dims[0] % info->block_elems)
      c.fail(field, fmt::format("row of {} elements is not a whole number of {} blocks ({} each)",
                                t.dims[0], info->name, info->block_elems), "the file is corrupt");
    const std::optional<uint64_t> bytes = checked_mul(t.n_elements / info->block_elems, info->block_bytes);
    if (!bytes)
      c.fail(field, fmt::format("{} of shape {} overflows 64 bits of bytes", info->name, shape_str(t.dims)),
             "the file is corrupt");
    t.n_bytes = *bytes;
    t.offset = c.read<uint64_t>(field + " offset");
    if (t.offset % f.alignment)
      c.fail(field + " offset", fmt::format("offset {} is not a multiple of the alignment {}", t.offset, f.alignment),
             "the file is corrupt");
    f.tensors.push_back(std::move(t));
  }

  f.data_offset = (c.pos + f.alignment - 1) / f.alignment * f.alignment;
  if (f.data_offset > size && !f.tensors.empty())
    throw GgufError(fmt::format("{}: tensor data section starts at byte {}, past the end of the "
                                "{}-byte file (hint: the file is truncated)", name, f.data_offset, size));
  for (auto& t : f.tensors) {
    uint64_t start = f.data_offset + t.offset;
    if (t.offset > size || start > size || t.n_bytes > size - start)
      throw GgufError(fmt::format("{}: tensor '{}' data [{}, {}) runs past the end of the {}-byte "
                                  "file (hint: the file is truncated)", name, t.name, start,
                                  start + t.n_bytes, size));
    t.data = base + start;
  }
  return f;
}

}  // namespace

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv.find(key);
  return it == kv.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void missing(const GgufFile& f, std::string_view key, const char* want) {
  throw GgufError(fmt::format("{}: metadata key '{}' ({}) is missing (hint: the file is incomplete "
                              "or not a model wgrt knows)", f.path, key, want));
}
[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const GgufValue& v, const char* want) {
  throw GgufError(fmt::format("{}: metadata key '{}' is a {}, expected {}", f.path, key,
                              gguf_type_name(v.type), want));
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) missing(*this, key, "string");
  if (auto* s = std::get_if<std::string>(&v->v)) return *s;
  wrong_type(*this, key, *v, "string");
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) missing(*this, key, "integer");
  if (auto* u = std::get_if<uint64_t>(&v->v)) return *u;
  if (auto* i = std::get_if<int64_t>(&v->v)) {
    if (*i < 0)
      throw GgufError(fmt::format("{}: metadata key '{}' = {} must not be negative", path, key, *i));
    return uint64_t(*i);
  }
  wrong_type(*this, key, *v, "integer");
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) missing(*this, key, "number");
  if (auto* d = std::get_if<double>(&v->v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v->v)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&v->v)) return double(*i);
  wrong_type(*this, key, *v, "number");
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) missing(*this, key, "bool");
  if (auto* b = std::get_if<bool>(&v->v)) return *b;
  wrong_type(*this, key, *v, "bool");
}

const GgufArray& GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) missing(*this, key, "array");
  if (auto* a = std::get_if<GgufArray>(&v->v)) return *a;
  wrong_type(*this, key, *v, "array");
}

std::optional<uint64_t> GgufFile::opt_uint(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_uint(key);
}
std::optional<double> GgufFile::opt_float(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_float(key);
}
std::optional<std::string> GgufFile::opt_string(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_string(key);
}

GgufFile parse_gguf(std::span<const uint8_t> bytes, const std::string& name) {
  return parse(bytes.data(), bytes.size(), name);
}

GgufFile open_gguf(const std::string& path) {
  std::shared_ptr<Mapping> m;
  try {
    m = map_file(path);
  } catch (const std::runtime_error& e) {
    throw GgufError(e.what());
  }
  GgufFile f = parse(m->bytes(), m->size, path);
  f.mapping = std::move(m);
  return f;
}

}  // namespace wgrt::model
