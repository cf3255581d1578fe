#include "reference/reference.h"

namespace wgrt::ref {

std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i % b.size()];
  return out;
}

std::vector<float> mul(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] * b[i % b.size()];
  return out;
}

std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w,
                          const std::vector<float>& bias, uint32_t m, uint32_t n, uint32_t k) {
  std::vector<float> y(size_t(m) * n);
  for (uint32_t i = 0; i < m; ++i)
    for (uint32_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : bias[j];
      for (uint32_t c = 0; c < k; ++c) acc += double(x[size_t(i) * k + c]) * w[size_t(j) * k + c];
      y[size_t(i) * n + j] = float(acc);
    }
  return y;
}

}  // namespace wgrt::ref
