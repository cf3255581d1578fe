// CPU reference for SwiGLU: out = silu(gate) * up, in double.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

// gate, up [n, ff] each.
std::vector<float> silu_mul(const std::vector<float>& gate, const std::vector<float>& up);
// One [n, 2 * ff] tensor, gate then up in each row.
std::vector<float> silu_mul_fused(const std::vector<float>& gate_up, uint32_t ff);

}  // namespace wgrt::ref
