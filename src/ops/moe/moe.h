// Mixture-of-experts FFN steps around the experts' weights (linear_q.h add_linear_q_experts):
//   moe_route    the router's logits [tokens, E] -> each token's k experts (largest logits, the
//                lower expert on ties) as (token, slot) pairs: ids [tokens * k] and weights
//                [tokens * k], softmax over all E (norm false) or over the chosen k (norm true:
//                Qwen3-MoE, Mixtral)
//   moe_combine  out[t] = residual[t] + sum_s weights[t k + s] * experts[t k + s]
// Both on the GPU, so a step routes its tokens with no read-back.
#pragma once

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct MoeRouteDesc {
  std::string name;       // node name; outputs `<name>.ids` and `<name>.weights`
  graph::TensorId logits;  // [tokens, E] f32, tokens may vary
  uint32_t n_used = 0;     // k
  bool norm = true;
};
struct MoeRoute {
  graph::TensorId ids, weights;
};
MoeRoute add_moe_route(graph::Graph& g, const MoeRouteDesc& d);
// Throws std::invalid_argument naming `name` unless k = n_used of e experts can be routed (also
// by linear_q.h add_linear_q_experts_routed).
void check_moe_route(const std::string& name, uint32_t e, uint32_t n_used);

struct MoeCombineDesc {
  std::string name;          // node and output name
  graph::TensorId experts;   // [tokens * k, n] f32: each pair's output
  graph::TensorId weights;   // [tokens * k] f32 (moe_route's)
  graph::TensorId residual;  // [tokens, n] f32
  uint32_t n_used = 0;       // k
};
graph::TensorId add_moe_combine(graph::Graph& g, const MoeCombineDesc& d);

struct MoeParams {
  uint32_t m, e, k, n, norm;
  uint32_t _pad0, _pad1, _pad2;
};
static_assert(sizeof(MoeParams) == 32);
extern const ParamLayout kMoeLayout;

// moe.wgsl's MOE_WG and MOE_MAX_E (ops/kernel_constants.cpp writes them, MOE_MAX_E a multiple of
// MOE_WG): the experts a router can have; and the most it may choose per token.
constexpr uint32_t kMoeWorkgroup = 128, kMoeMaxExperts = 512, kMoeMaxUsed = 32;
static_assert(kMoeMaxExperts % kMoeWorkgroup == 0);

}  // namespace wgrt::ops
