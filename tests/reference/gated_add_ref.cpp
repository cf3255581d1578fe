#include "reference/gated_add_ref.h"

#include <cmath>

namespace wgrt::ref {

std::vector<float> gated_add(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& h,
                             const std::vector<float>& w, uint32_t n, uint32_t k) {
  const size_t rows = x.size() / n;
  std::vector<float> out(x.size());
  for (size_t r = 0; r < rows; ++r) {
    double z = 0;
    for (uint32_t i = 0; i < k; ++i) z += double(h[r * k + i]) * w[i];
    const double gate = 1.0 / (1.0 + std::exp(-z));
    for (uint32_t i = 0; i < n; ++i) out[r * n + i] = float(x[r * n + i] + gate * y[r * n + i]);
  }
  return out;
}

}  // namespace wgrt::ref
