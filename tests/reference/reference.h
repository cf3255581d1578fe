// Plain CPU references for the ops: the straightforward loops, in double where it matters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wgrt::ref {

// out[i] = a[i] + b[i % b.size()]
std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b);
std::vector<float> mul(const std::vector<float>& a, const std::vector<float>& b);

// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]); bias may be empty.
std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w,
                          const std::vector<float>& bias, uint32_t m, uint32_t n, uint32_t k);

}  // namespace wgrt::ref
