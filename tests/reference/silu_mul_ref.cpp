#include "reference/silu_mul_ref.h"

#include <cmath>

namespace wgrt::ref {
namespace {
double silu(double g) { return g / (1.0 + std::exp(-g)); }
double gelu_tanh(double g) { return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))); }
}  // namespace

std::vector<float> gelu_mul(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) out[i] = float(gelu_tanh(gate[i]) * double(up[i]));
  return out;
}

std::vector<float> silu_mul(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) out[i] = float(silu(gate[i]) * double(up[i]));
  return out;
}

std::vector<float> silu_mul_fused(const std::vector<float>& gate_up, uint32_t ff) {
  size_t rows = gate_up.size() / (2 * size_t(ff));
  std::vector<float> out(rows * ff);
  for (size_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < ff; ++c)
      out[r * ff + c] = float(silu(gate_up[r * 2 * ff + c]) * double(gate_up[r * 2 * ff + ff + c]));
  return out;
}

}  // namespace wgrt::ref
