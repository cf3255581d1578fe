// q8_0 KV caches on the host (layout: ops/kv_cache/kv_cache.h): the quantizing rule kv_write
// follows, the tensor's two planes, and the values the attention kernels read from it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "graph/graph.h"
#include "ops/kv_cache/kv_cache.h"
#include "reference/attention_ref.h"

namespace wgrt::test {

// Blocks of 32 values: q (one int8 a value) and d (an f16 a block).
struct Q8Values {
  std::vector<int8_t> q;
  std::vector<uint16_t> d;
};

constexpr uint16_t kF16Nan = 0x7e00;

// d = amax / 127, q = round(x / d) with ties away from zero (computed as x * (1 / d)); d is
// stored as f16. A block holding a NaN gets d = NaN and q = 0 (the tests' "never read" rows).
inline Q8Values quantize_q8(const std::vector<float>& x) {
  Q8Values r{std::vector<int8_t>(x.size()), std::vector<uint16_t>(x.size() / ops::kQ8Block)};
  for (size_t b = 0; b < r.d.size(); ++b) {
    const float* v = &x[b * ops::kQ8Block];
    float amax = 0;
    bool nan = false;
    for (uint32_t i = 0; i < ops::kQ8Block; ++i) {
      nan = nan || std::isnan(v[i]);
      amax = std::max(amax, std::fabs(v[i]));
    }
    if (nan) {
      r.d[b] = kF16Nan;
      continue;
    }
    const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    r.d[b] = ref::f32_to_f16(d);
    for (uint32_t i = 0; i < ops::kQ8Block; ++i)
      r.q[b * ops::kQ8Block + i] = int8_t(std::clamp(std::round(v[i] * id), -127.0f, 127.0f));
  }
  return r;
}

// The values the attention kernels read: d * q (d as stored, f16) rounded through f16, as they
// dequantize a word in registers into the f16 word of their f16 path.
inline std::vector<float> dequantize_q8(const Q8Values& v) {
  std::vector<float> x(v.q.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = ref::round_f16(ref::f16_to_f32(v.d[i / ops::kQ8Block]) * float(v.q[i]));
  return x;
}

// A tensor's words: rows of head_dim quants, then each row's scale words.
inline std::vector<uint32_t> pack_q8(const Q8Values& v, uint32_t head_dim) {
  const size_t rows = v.q.size() / head_dim, sw = ops::q8_scale_words(head_dim), bpr = head_dim / ops::kQ8Block;
  std::vector<uint32_t> w(v.q.size() / 4 + rows * sw, 0);
  std::memcpy(w.data(), v.q.data(), v.q.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t b = 0; b < bpr; ++b) w[v.q.size() / 4 + r * sw + b / 2] |= uint32_t(v.d[r * bpr + b]) << (16 * (b % 2));
  return w;
}

inline Q8Values unpack_q8(const std::vector<uint32_t>& w, size_t rows, uint32_t head_dim) {
  const size_t n = rows * head_dim, sw = ops::q8_scale_words(head_dim), bpr = head_dim / ops::kQ8Block;
  Q8Values v{std::vector<int8_t>(n), std::vector<uint16_t>(rows * bpr)};
  std::memcpy(v.q.data(), w.data(), n);
  for (size_t r = 0; r < rows; ++r)
    for (size_t b = 0; b < bpr; ++b) v.d[r * bpr + b] = uint16_t(w[n / 4 + r * sw + b / 2] >> (16 * (b % 2)));
  return v;
}

}  // namespace wgrt::test
