// Deterministic test data.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace wgrt::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Largest |a - b| relative to (1 + |b|).
inline float max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = a.size() == b.size() ? 0.f : 1e30f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    float d = std::abs(a[i] - b[i]) / (1.f + std::abs(b[i]));
    if (!(d <= worst)) worst = d;  // NaN propagates as a failure
  }
  return worst;
}

}  // namespace wgrt::test
