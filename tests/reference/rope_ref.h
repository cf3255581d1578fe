// CPU reference for rotary position embedding: plain loops in double.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

struct RopeRefConfig {
  uint32_t n_heads = 0, head_dim = 0, n_rot = 0;
  bool neox = false;  // pairs (j, j + n_rot/2) instead of (2j, 2j + 1)
  double theta = 10000;
  // llama3 rope_scaling; factor 0 = none.
  double factor = 0, low_freq_factor = 1, high_freq_factor = 4, original_max_position = 8192;
  std::vector<double> freq_factors;  // empty, or a divisor per pair (GGUF rope_freqs)
};

// theta^(-2j/n_rot) for j < n_rot/2, llama3-scaled when factor > 0.
std::vector<double> rope_inv_freq(const RopeRefConfig& c);

// x [n_tokens, n_heads * head_dim]; row i at position pos + i.
std::vector<float> rope(const std::vector<float>& x, uint32_t n_tokens, int64_t pos,
                        const RopeRefConfig& c);
// The same with row i at positions[i] (a step of several sequences, ops::KvRows).
std::vector<float> rope_at(const std::vector<float>& x, const std::vector<int64_t>& positions,
                           const RopeRefConfig& c);

}  // namespace wgrt::ref
