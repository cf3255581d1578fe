#include "graph/shape.h"

#include <fmt/format.h>

#include "graph/check.h"

namespace wgrt::graph {

Shape::Shape(std::initializer_list<uint32_t> d) {
  WGRT_CHECK(d.size() <= size_t(kMaxRank), "a shape of {} dims (at most {})", d.size(), kMaxRank);
  for (uint32_t v : d) dims[rank++] = v;
}

uint64_t Shape::numel() const {
  uint64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[size_t(i)];
  return n;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) out += fmt::format("{}{}", i ? ", " : "", s.dims[size_t(i)]);
  return out + "]";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::Bytes: return "bytes";
    case DType::Q8_0: return "q8_0";
  }
  return "?";
}

uint64_t dtype_bytes(DType t, const Shape& s) {
  uint64_t n = s.numel();
  switch (t) {
    case DType::F16: return (n + 1) / 2 * 4;
    case DType::Bytes: return (n + 3) / 4 * 4;  // a Bytes tensor's shape counts bytes
    case DType::Q8_0: {
      const uint64_t row = s.rank ? s.dims[size_t(s.rank - 1)] : 1, rows = row ? n / row : 0;
      return rows * (row + (row + 63) / 64 * 4);  // quants, then each row's f16 scales in whole words
    }
    default: return n * 4;
  }
}

}  // namespace wgrt::graph
