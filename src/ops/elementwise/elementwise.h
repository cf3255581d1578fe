// Elementwise binary ops: out = a (op) b, where b has a's shape or broadcasts along a's
// leading dims (b's numel divides a's: a bias row, a per-channel scale). Unary ops with a
// constant: out = x * value (Scale: Gemma's embedding scale), out = value * tanh(x / value)
// (Softcap: Gemma 2's final logit soft-capping).
#pragma once

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

enum class Binary : uint8_t { Add, Mul };

struct BinaryDesc {
  std::string name;  // node and output tensor name, e.g. "ffn_out.3"
  Binary op = Binary::Add;
  graph::TensorId a;
  graph::TensorId b;
};

// Returns the output tensor (shape of a).
graph::TensorId add_binary(graph::Graph& g, const BinaryDesc& d);

enum class Unary : uint8_t { Scale, Softcap };

struct UnaryDesc {
  std::string name;  // node and output tensor name
  Unary op = Unary::Scale;
  graph::TensorId x;  // f32, its dim 0 dynamic
  float value = 1;    // the factor (Scale) or the cap (Softcap: finite, > 0)
};

// Returns the output tensor (shape of x).
graph::TensorId add_unary(graph::Graph& g, const UnaryDesc& d);

struct ElementwiseParams {
  uint32_t n;    // live elements of a and out
  uint32_t b_n;  // elements of b; index i reads b[i % b_n]
  float value;   // the unary ops' constant
  uint32_t _pad1;
};
static_assert(sizeof(ElementwiseParams) == 16);
extern const ParamLayout kElementwiseLayout;

// Named hooks (typed contexts).
struct BinaryInferCtx {
  graph::Shape a, b;
};
graph::Shape infer_binary(const BinaryInferCtx& c);

struct BinaryPlanCtx {
  graph::Shape out, b;
  uint32_t max_groups_per_dim;
};
void plan_binary(const BinaryPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
