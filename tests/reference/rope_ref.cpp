#include "reference/rope_ref.h"

#include <cmath>

namespace wgrt::ref {

std::vector<double> rope_inv_freq(const RopeRefConfig& c) {
  const double pi = 3.14159265358979323846;
  std::vector<double> inv;
  for (uint32_t j = 0; j < c.n_rot / 2; ++j) {
    double f = 1.0 / std::pow(c.theta, double(2 * j) / double(c.n_rot));
    if (c.factor > 0) {
      // Meta's apply_scaling (llama3): wavelengths below original/high_freq_factor keep their
      // frequency, above original/low_freq_factor are divided by factor, in between blended.
      double wavelen = 2 * pi / f;
      double low_wavelen = c.original_max_position / c.low_freq_factor;
      double high_wavelen = c.original_max_position / c.high_freq_factor;
      if (wavelen < high_wavelen) {
      } else if (wavelen > low_wavelen) {
        f = f / c.factor;
      } else {
        double smooth = (c.original_max_position / wavelen - c.low_freq_factor) /
                        (c.high_freq_factor - c.low_freq_factor);
        f = (1 - smooth) * f / c.factor + smooth * f;
      }
    }
    if (!c.freq_factors.empty()) f /= c.freq_factors[j];
    inv.push_back(f);
  }
  return inv;
}

std::vector<float> rope(const std::vector<float>& x, uint32_t n_tokens, int64_t pos,
                        const RopeRefConfig& c) {
  std::vector<int64_t> positions(n_tokens);
  for (uint32_t t = 0; t < n_tokens; ++t) positions[t] = pos + t;
  return rope_at(x, positions, c);
}

std::vector<float> rope_at(const std::vector<float>& x, const std::vector<int64_t>& positions,
                           const RopeRefConfig& c) {
  std::vector<double> inv = rope_inv_freq(c);
  std::vector<float> y = x;
  for (uint32_t t = 0; t < positions.size(); ++t)
    for (uint32_t h = 0; h < c.n_heads; ++h) {
      size_t base = (size_t(t) * c.n_heads + h) * c.head_dim;
      for (uint32_t j = 0; j < c.n_rot / 2; ++j) {
        size_t a = c.neox ? base + j : base + 2 * j;
        size_t b = c.neox ? base + j + c.n_rot / 2 : base + 2 * j + 1;
        double angle = double(positions[t]) * inv[j];
        double cs = std::cos(angle), sn = std::sin(angle);
        double x0 = x[a], x1 = x[b];
        y[a] = float(x0 * cs - x1 * sn);
        y[b] = float(x0 * sn + x1 * cs);
      }
    }
  return y;
}

}  // namespace wgrt::ref
