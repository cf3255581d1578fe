// CPU quantization into GGML block types (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, IQ4_NL,
// IQ4_XS), for writing GGUF fixtures and tools. Straightforward round-to-nearest; not tuned for quality.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/ggml_types.h"

namespace wgrt::model {

// `x.size()` must be a whole number of the type's blocks.
std::vector<uint8_t> quantize(GgmlType type, std::span<const float> x);

}  // namespace wgrt::model
