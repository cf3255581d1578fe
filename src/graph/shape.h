// Shapes, dtypes and ids: the nouns of the graph.
//
// Layout convention: a tensor's live contents are compact row-major in its live shape, at
// the start of its buffer (at least max_shape's size; graph/memory.h says who shares it).
// Kernels index with live sizes from their uniform block; nothing is strided by the max shape.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace wgrt::graph {

struct TensorId {
  uint32_t v = UINT32_MAX;
  bool operator==(const TensorId&) const = default;
};
struct SymbolId {
  uint32_t v = UINT32_MAX;
  bool operator==(const SymbolId&) const = default;
};
struct NodeId {
  uint32_t v = UINT32_MAX;
  bool operator==(const NodeId&) const = default;
};

constexpr int kMaxRank = 4;

struct Shape {
  uint8_t rank = 0;
  std::array<uint32_t, kMaxRank> dims{};

  Shape() = default;
  Shape(std::initializer_list<uint32_t> d);
  uint32_t operator[](int i) const { return dims[size_t(i)]; }
  uint32_t& operator[](int i) { return dims[size_t(i)]; }
  uint64_t numel() const;
  bool operator==(const Shape&) const = default;
};

std::string to_string(const Shape& s);  // "[37, 64]"

enum class DType : uint8_t {
  F32,
  F16,    // two halves per u32 (pack2x16float), so no shader-f16 is needed
  I32,
  U32,
  Bytes,  // opaque packed data (quantized weights, ...): its byte size is given explicitly
  // A KV cache of int8 blocks (ops/kv_cache/kv_cache.h, "q8_0 caches"): shape [..., rows, row]
  // with row a multiple of 32; the quants of every row (1 byte each), then every row's f16
  // block scales padded to whole u32 words.
  Q8_0,
};

const char* dtype_name(DType t);

// Bytes a tensor of this dtype and shape occupies (rounded up to whole u32 words).
uint64_t dtype_bytes(DType t, const Shape& s);

}  // namespace wgrt::graph
