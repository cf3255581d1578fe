// Overflow-checked sizes of the tensor shapes that model files declare: every product of
// untrusted dims goes through these, so a shape whose size wraps 64 bits is refused rather
// than read as a small one.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace wgrt::model {

// a * b, or nullopt where it overflows 64 bits.
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The number of elements of `dims`, or nullopt where the product overflows 64 bits.
inline std::optional<uint64_t> shape_elements(std::span<const uint64_t> dims) {
  uint64_t n = 1;
  for (uint64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

// "[4096, 32000]", for messages.
inline std::string shape_str(std::span<const uint64_t> dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

}  // namespace wgrt::model
