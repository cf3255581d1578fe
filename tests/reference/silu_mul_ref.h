// CPU reference for SwiGLU: out = silu(gate) * up, and GeGLU: gelu_tanh(gate) * up, in double.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

// gate, up [n, ff] each.
std::vector<float> silu_mul(const std::vector<float>& gate, const std::vector<float>& up);
// gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) times up.
std::vector<float> gelu_mul(const std::vector<float>& gate, const std::vector<float>& up);
// Gate activations' derivatives stay within these (the bound of an error carried through them).
inline constexpr double kSiluSlopeMax = 1.1, kGeluTanhSlopeMax = 1.13;
// One [n, 2 * ff] tensor, gate then up in each row.
std::vector<float> silu_mul_fused(const std::vector<float>& gate_up, uint32_t ff);

}  // namespace wgrt::ref
