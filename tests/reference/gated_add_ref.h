// CPU reference for the sigmoid-gated add: out = x + sigmoid(h · w) * y per row, in double.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

// x, y [rows, n]; h [rows, k]; w [k].
std::vector<float> gated_add(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& h,
                             const std::vector<float>& w, uint32_t n, uint32_t k);

}  // namespace wgrt::ref
