// linear with f32 or f16 weights: y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]).
// f16 weights are a DType::F16 tensor (two halves per u32, pack2x16float) with K even.
// Weight layout [N, K] (row n holds output n's weights), as in GGUF and PyTorch.
// Routes on x's live rows (n_tokens): [1, 1] GEMV, [2, max] tiled GEMM.
#pragma once

#include <optional>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct LinearDesc {
  std::string name;  // node and output name, e.g. "attn_q.0"
  graph::TensorId x;  // [M, K], M may vary
  graph::TensorId w;  // [N, K] f32 or f16
  std::optional<graph::TensorId> bias;  // [N] f32
};

graph::TensorId add_linear(graph::Graph& g, const LinearDesc& d);

struct LinearParams {
  uint32_t m, n, k, has_bias;
};
static_assert(sizeof(LinearParams) == 16);
extern const ParamLayout kLinearLayout;

struct LinearInferCtx {
  graph::Shape x, w;
};
graph::Shape infer_linear(const LinearInferCtx& c);

// Route ids (graph/routes.h): gemv [1, 1], tiled [2, max] on x's rows.
inline constexpr graph::RouteId kLinearGemv{1}, kLinearTiled{2};
struct LinearPlanCtx {
  uint32_t m, n, k;
  bool has_bias;
  bool gemv;  // the active route
  uint32_t max_groups_per_dim;
};
void plan_linear(const LinearPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
