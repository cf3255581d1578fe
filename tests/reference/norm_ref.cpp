#include "reference/norm_ref.h"

#include <cmath>

namespace wgrt::ref {

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w,
                            uint32_t row_size, double eps) {
  std::vector<float> y(x.size());
  for (size_t base = 0; base < x.size(); base += row_size) {
    double ssq = 0;
    for (uint32_t i = 0; i < row_size; ++i) ssq += double(x[base + i]) * double(x[base + i]);
    double inv = 1.0 / std::sqrt(ssq / row_size + eps);
    for (uint32_t i = 0; i < row_size; ++i) y[base + i] = float(double(x[base + i]) * inv * double(w[i]));
  }
  return y;
}

}  // namespace wgrt::ref
