// CPU reference for rms_norm: plain loops, double accumulation.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

// Rows of `row_size` over x (numel a multiple of it): y = x / sqrt(mean(x²) + eps) * w.
std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w,
                            uint32_t row_size, double eps);

}  // namespace wgrt::ref
