// References for the quantized linear's int8-activation GEMM route: the activation rounding
// the GPU does (one scale per row and group), the matching integer GEMM, and the worst-case
// error bound of that rounding against f32 math.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

// x [m, k] -> q in [-127, 127] and scales [m, k/gs]: scale = absmax / 127, q = round-half-even
// of x * (127 / absmax) (0 for an all-zero group).
struct QuantizedActivations {
  std::vector<int8_t> q;
  std::vector<float> scales;
};
QuantizedActivations quantize_activations(const std::vector<float>& x, uint32_t m, uint32_t k, uint32_t gs);

// y = dequant(qa) @ w^T (+ bias), in double: what the GEMM computes up to f32 rounding.
// w is the dequantized weight [n, k].
std::vector<float> linear_int8_act(const QuantizedActivations& qa, const std::vector<float>& w,
                                   const std::vector<float>& bias, uint32_t m, uint32_t n, uint32_t k,
                                   uint32_t gs);

// Per output: sum over k of |w[n, k]| * absmax(x row m, group of k) / 254, the largest error
// round-to-nearest int8 activations can add against the f32 result (each activation moves by
// at most half a step, step = absmax / 127).
std::vector<float> int8_act_error_bound(const std::vector<float>& x, const std::vector<float>& w,
                                        uint32_t m, uint32_t n, uint32_t k, uint32_t gs);

// Per output: sum over k of |x[m, k] * w[n, k]| (scale for f32 rounding tolerances).
std::vector<float> abs_dot(const std::vector<float>& x, const std::vector<float>& w, uint32_t m,
                           uint32_t n, uint32_t k);

}  // namespace wgrt::ref
