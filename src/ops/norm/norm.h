// RMS norm over rows: y = x / sqrt(mean(x²) + eps) * weight.
//
// x [n_tokens, cols] f32 (n_tokens may vary). Rows are `row_size` consecutive elements:
// row_size = cols normalizes each token (attn_norm, ffn_norm); row_size = head_dim normalizes
// each head (qwen3's q/k norm over [n_tokens, n_heads * head_dim]). weight [row_size] f32.
// One workgroup per row reduces the sum of squares. Rows whose sum of squares overflows f32
// (|x| past ~1e19) are summed again scaled by their largest |x|, so large magnitudes still
// normalize correctly.
#pragma once

#include <optional>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct RmsNormDesc {
  std::string name;        // node and output name, e.g. "attn_norm.3"
  graph::TensorId x;       // [n_tokens, cols] f32
  graph::TensorId weight;  // [row_size] f32
  float eps = 1e-5f;
  uint32_t row_size = 0;   // 0: the whole last dim; must divide cols
  // y = residual + norm(x) * weight: the norm's output joins the residual stream in the same
  // kernel (Gemma's post-attention and post-FFN norms); shaped as x, live shapes equal.
  std::optional<graph::TensorId> residual;
  // A symbol in [0, 1]: the node runs only while it is 1 (the embeddings' hidden states, which
  // decode steps never ask for), keyed as routes "off" [0, 0] (no kernels) and "on" [1, 1].
  std::optional<graph::SymbolId> enable;
};
// Route ids with an enable symbol; without one the node has graph::kMainRoute alone.
constexpr uint32_t kRmsNormWorkgroup = 256;  // rms_norm.wgsl WG (ops/kernel_constants.cpp writes it)
inline constexpr graph::RouteId kRmsNormOff{2}, kRmsNormOn{3};

// Returns the output tensor (shape of x).
graph::TensorId add_rms_norm(graph::Graph& g, const RmsNormDesc& d);

struct RmsNormParams {
  uint32_t n_rows;    // live rows (numel / row_size)
  uint32_t row_size;
  float eps;
  uint32_t _pad0;
};
static_assert(sizeof(RmsNormParams) == 16);
extern const ParamLayout kRmsNormLayout;

struct RmsNormInferCtx {
  graph::Shape x;
  uint32_t row_size;
};
graph::Shape infer_rms_norm(const RmsNormInferCtx& c);

struct RmsNormPlanCtx {
  graph::Shape x;
  uint32_t row_size;
  float eps;
  uint32_t max_groups_per_dim;
};
void plan_rms_norm(const RmsNormPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
