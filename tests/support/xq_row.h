// Checks an xq row (xq_row.wgsl: one row of activations quantized ahead in int8 blocks of 16)
// against the reference quantization of the values it was made from.
#pragma once

#include <cstdint>
#include <span>

#include "reference/linear_q_ref.h"

namespace wgrt::test {

// `words`: the row as read back; `u`: the values the producer quantized (times the consumer's
// norm weight where it multiplies one in); `h`: the values whose squares each block sums (u
// without that weight). Each scale within 3 ULP of amax / 127 (WGSL's division), each int8 within
// half a step (+1e-4) of u * 127 / amax, the q4-order words the natural ones reordered, the int8
// sums exact, the sums of squares within f32 rounding. Fills `qa` with the row's activations
// (scales per block of 16), for a consumer's reference. Fatal failures end the check.
void check_xq_row(std::span<const uint32_t> words, std::span<const float> u, std::span<const float> h,
                  ref::QuantizedActivations& qa);

}  // namespace wgrt::test
