// linear with f32 or f16 weights: y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]).
// f16 weights are a DType::F16 tensor (two halves per u32, pack2x16float) with K even.
// Weight layout [N, K] (row n holds output n's weights), as in GGUF and PyTorch.
// Routes on x's live rows (n_tokens): [1, 1] GEMV, [2, max] tiled GEMM.
// A weight split by rows (LinearDesc::more: a matrix past the device's storage binding limit
// loaded as several tensors) runs one kernel per part in each route, each writing its columns.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct LinearDesc {
  std::string name;  // node and output name, e.g. "attn_q.0"
  graph::TensorId x;  // [M, K], M may vary
  graph::TensorId w;  // [N0, K] f32 or f16
  std::vector<graph::TensorId> more;  // further rows of the weight, [N_i, K] of w's dtype: y = x [w | more...]^T
  std::optional<graph::TensorId> bias;  // [N] f32, N the rows of all parts
  // RMS-normalize x first with this weight [K] (a mixture-of-experts router reading the FFN's
  // input): inside the gemv where K is whole vec4 words, else an rms_norm kernel before it.
  std::optional<graph::TensorId> norm;
  float eps = 1e-5f;
};

graph::TensorId add_linear(graph::Graph& g, const LinearDesc& d);

struct LinearParams {
  uint32_t m, n, k, has_bias;  // n: this part's rows
  uint32_t y_off, ld;          // the part's first column of y, y's row length
  float eps;                   // gemv_vec4 NORM
  uint32_t _pad1;
};
static_assert(sizeof(LinearParams) == 32);
extern const ParamLayout kLinearLayout;

struct LinearInferCtx {
  graph::Shape x, w;
  uint32_t n = 0;  // all parts' rows (0: w's)
};
graph::Shape infer_linear(const LinearInferCtx& c);

// Route ids (graph/routes.h): gemv [1, 1], tiled [2, max] on x's rows. The gemv reads vec4
// words (gemv_vec4) where K is a multiple of 4 (f16: 8).
// linear.wgsl ROWS (rows per gemv workgroup) and TILE (the tiled route's square), written into
// it by ops/kernel_constants.cpp.
constexpr uint32_t kLinearGemvRows = 4, kLinearTile = 64;
inline constexpr graph::RouteId kLinearGemv{1}, kLinearTiled{2};
struct LinearPlanCtx {
  uint32_t m, k;
  std::span<const uint32_t> rows;  // each part's rows, in order
  bool has_bias;
  bool gemv;  // the active route
  uint32_t max_groups_per_dim;
  float eps = 0;
  bool norm_kernel = false;  // an rms_norm kernel comes first (params[0], grids[0])
};
// A kernel per part: params[i] and grids[i] (after the rms_norm's, where norm_kernel).
void plan_linear(const LinearPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
