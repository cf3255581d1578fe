#include "reference/linear_q_ref.h"

#include <algorithm>
#include <cmath>

namespace wgrt::ref {

QuantizedActivations quantize_activations(const std::vector<float>& x, uint32_t m, uint32_t k, uint32_t gs) {
  QuantizedActivations qa;
  qa.q.resize(size_t(m) * k);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t g = 0; g < k / gs; ++g) {
      size_t base = size_t(r) * k + size_t(g) * gs;
      float amax = 0;
      for (uint32_t i = 0; i < gs; ++i) amax = std::max(amax, std::fabs(x[base + i]));
      qa.scales.push_back(amax / 127.0f);
      float inv = amax > 0 ? 127.0f / amax : 0.0f;
      for (uint32_t i = 0; i < gs; ++i)
        qa.q[base + i] = int8_t(std::nearbyint(x[base + i] * inv));  // ties to even, as WGSL round
    }
  return qa;
}

std::vector<float> linear_int8_act(const QuantizedActivations& qa, const std::vector<float>& w,
                                   const std::vector<float>& bias, uint32_t m, uint32_t n, uint32_t k,
                                   uint32_t gs) {
  std::vector<float> y(size_t(m) * n);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < n; ++c) {
      double acc = bias.empty() ? 0.0 : bias[c];
      for (uint32_t i = 0; i < k; ++i)
        acc += double(qa.q[size_t(r) * k + i]) * qa.scales[size_t(r) * (k / gs) + i / gs] *
               w[size_t(c) * k + i];
      y[size_t(r) * n + c] = float(acc);
    }
  return y;
}

std::vector<float> int8_act_error_bound(const std::vector<float>& x, const std::vector<float>& w,
                                        uint32_t m, uint32_t n, uint32_t k, uint32_t gs) {
  std::vector<double> amax(size_t(m) * (k / gs), 0.0);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t i = 0; i < k; ++i) {
      double& a = amax[size_t(r) * (k / gs) + i / gs];
      a = std::max(a, double(std::fabs(x[size_t(r) * k + i])));
    }
  std::vector<float> bound(size_t(m) * n);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < n; ++c) {
      double b = 0;
      for (uint32_t i = 0; i < k; ++i)
        b += std::fabs(double(w[size_t(c) * k + i])) * amax[size_t(r) * (k / gs) + i / gs] / 254.0;
      bound[size_t(r) * n + c] = float(b);
    }
  return bound;
}

std::vector<float> abs_dot(const std::vector<float>& x, const std::vector<float>& w, uint32_t m,
                           uint32_t n, uint32_t k) {
  std::vector<float> out(size_t(m) * n);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < n; ++c) {
      double s = 0;
      for (uint32_t i = 0; i < k; ++i) s += std::fabs(double(x[size_t(r) * k + i]) * w[size_t(c) * k + i]);
      out[size_t(r) * n + c] = float(s);
    }
  return out;
}

}  // namespace wgrt::ref
