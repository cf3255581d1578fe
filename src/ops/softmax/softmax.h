// Softmax over the last dim: rows of a [rows, n] f32 tensor, rows may vary.
// Numerically stable (max subtracted first), so logits of any magnitude are safe.
#pragma once

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

constexpr uint32_t kSoftmaxWorkgroup = 256;  // softmax.wgsl WG (ops/kernel_constants.cpp writes it)

struct SoftmaxDesc {
  std::string name;  // node and output name
  graph::TensorId x;  // [rows, n] f32
};

graph::TensorId add_softmax(graph::Graph& g, const SoftmaxDesc& d);

struct SoftmaxParams {
  uint32_t rows, n, _pad0, _pad1;
};
static_assert(sizeof(SoftmaxParams) == 16);
extern const ParamLayout kSoftmaxLayout;

struct SoftmaxInferCtx {
  graph::Shape x;
};
graph::Shape infer_softmax(const SoftmaxInferCtx& c);

struct SoftmaxPlanCtx {
  uint32_t rows, n;
  uint32_t max_groups_per_dim;
};
void plan_softmax(const SoftmaxPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
