// Random quantized weights for the linear_q tests, with the reference's reading of them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/quant/quant.h"

namespace wgrt::test {

// A weight [n, k] of format f: from random GGUF blocks (K-quants, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS), or
// random floats in [-1, 1) quantized by wgrt (q4gsw, q8, group size gs); and the reference's
// dequantization of it (ref:: block readers, or ref::dequant_q4gsw / dequant_q8).
std::pair<ops::QuantWeight, std::vector<float>> random_quant_weight(ops::QuantFormat f, uint32_t n, uint32_t k,
                                                                    uint32_t gs, uint32_t seed);

}  // namespace wgrt::test
