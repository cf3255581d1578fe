#include "reference/moe_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace wgrt::ref {

MoeChoice moe_route(const std::vector<float>& logits, uint32_t m, uint32_t e, uint32_t k, bool norm) {
  MoeChoice c;
  for (uint32_t t = 0; t < m; ++t) {
    const float* l = &logits[size_t(t) * e];
    std::vector<uint32_t> order(e);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return l[a] > l[b]; });
    const double top = l[order[0]];
    double total = 0;
    for (uint32_t i = 0; i < (norm ? k : e); ++i) total += std::exp(double(l[norm ? order[i] : i]) - top);
    for (uint32_t s = 0; s < k; ++s) {
      c.ids.push_back(order[s]);
      c.weights.push_back(float(std::exp(double(l[order[s]]) - top) / total));
    }
  }
  return c;
}

std::vector<float> moe_combine(const std::vector<float>& experts, const std::vector<float>& weights,
                               const std::vector<float>& residual, uint32_t m, uint32_t k, uint32_t n) {
  std::vector<float> out(size_t(m) * n);
  for (uint32_t t = 0; t < m; ++t)
    for (uint32_t c = 0; c < n; ++c) {
      double acc = residual[size_t(t) * n + c];
      for (uint32_t s = 0; s < k; ++s) acc += double(weights[t * k + s]) * experts[(size_t(t) * k + s) * n + c];
      out[size_t(t) * n + c] = float(acc);
    }
  return out;
}

}  // namespace wgrt::ref
