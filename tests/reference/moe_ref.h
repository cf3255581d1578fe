// CPU reference for mixture-of-experts routing and combining, in double: the k largest router
// logits of each token (the lower expert on ties), their softmax weights over all experts or,
// with norm, over the chosen ones; and the weighted sum of the chosen experts' outputs.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

struct MoeChoice {
  std::vector<uint32_t> ids;   // [m * k], slot order: largest logit first
  std::vector<float> weights;  // [m * k]
};
MoeChoice moe_route(const std::vector<float>& logits, uint32_t m, uint32_t e, uint32_t k, bool norm);

// out[t] = residual[t] + sum_s weights[t k + s] * experts[t k + s]; experts [m * k, n].
std::vector<float> moe_combine(const std::vector<float>& experts, const std::vector<float>& weights,
                               const std::vector<float>& residual, uint32_t m, uint32_t k, uint32_t n);

}  // namespace wgrt::ref
