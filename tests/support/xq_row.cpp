#include "support/xq_row.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/linear_q/linear_q.h"

namespace wgrt::test {

void check_xq_row(std::span<const uint32_t> words, std::span<const float> u, std::span<const float> h,
                  ref::QuantizedActivations& qa) {
  const uint32_t k = uint32_t(u.size());
  ASSERT_EQ(k % 16, 0u);
  ASSERT_EQ(h.size(), size_t(k));
  ASSERT_EQ(words.size(), size_t(ops::linear_q_xq_words(k)));
  qa.q.assign(k, 0);
  qa.scales.clear();
  for (uint32_t i = 0; i < k; ++i) qa.q[i] = int8_t(uint8_t(words[i / 4] >> (8 * (i % 4))));
  auto byte = [&](uint32_t i) { return uint32_t(uint8_t(qa.q[i])); };
  for (uint32_t w = 0; w < k / 4; ++w) {
    const uint32_t g8 = 8 * (w / 2), odd = w % 2;  // q4 order: values 0, 2, 4, 6 then 1, 3, 5, 7 of 8
    const uint32_t q4 = byte(g8 + odd) | byte(g8 + odd + 2) << 8 | byte(g8 + odd + 4) << 16 | byte(g8 + odd + 6) << 24;
    ASSERT_EQ(words[k / 4 + w], q4) << "q4-order word " << w << " against the natural-order words";
  }
  for (uint32_t b = 0; b < k / 16; ++b) {
    float scale, sum, ss;
    std::memcpy(&scale, &words[k / 2 + 2 * b], 4);
    std::memcpy(&sum, &words[k / 2 + 2 * b + 1], 4);
    std::memcpy(&ss, &words[5 * k / 8 + b], 4);
    qa.scales.push_back(scale);
    double amax = 0, want_ss = 0;
    int32_t hs = 0;
    for (uint32_t i = 16 * b; i < 16 * b + 16; ++i) {
      amax = std::max(amax, std::fabs(double(u[i])));
      hs += qa.q[i];
      want_ss += double(h[i]) * h[i];
    }
    ASSERT_NEAR(scale, amax / 127, 3 * 0x1p-23 * amax / 127) << "block " << b << "'s scale";
    for (uint32_t i = 16 * b; i < 16 * b + 16; ++i)
      ASSERT_LE(std::fabs(qa.q[i] - (amax > 0 ? u[i] * 127 / amax : 0.0)), 0.5 + 1e-4) << "value " << i;
    ASSERT_EQ(sum, float(hs)) << "block " << b << "'s int8 sum";
    ASSERT_NEAR(ss, want_ss, 1e-5 * want_ss + 1e-30) << "block " << b << "'s sum of squares";
  }
}

}  // namespace wgrt::test
