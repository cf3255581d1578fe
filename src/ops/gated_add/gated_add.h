// Sigmoid-gated add: out = x + sigmoid(h · w) * y, one scalar gate per row.
//
// x, y [n_tokens, n] f32 (x the residual stream, y what joins it); h [n_tokens, k] f32, the
// gate's input; w [k] f32, the gate's weight. n_tokens may vary. Qwen2-MoE's shared expert:
// y its output, h the FFN-normed hidden state, w ffn_gate_inp_shexp. One workgroup per row
// reduces h · w, then writes the row. With `norm`, h is the FFN's input and the kernel
// RMS-normalizes it on the way (h · (norm ∘ w) and h · h in one reduction), so no kernel has to
// write the normed rows where the shared expert's gate|up normalizes inside.
#pragma once

#include <optional>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct GatedAddDesc {
  std::string name;  // node and output name, e.g. "ffn_shexp_residual.3"
  graph::TensorId x;  // [n_tokens, n]
  graph::TensorId y;  // [n_tokens, n]
  graph::TensorId h;  // [n_tokens, k]
  graph::TensorId w;  // [k]
  std::optional<graph::TensorId> norm;  // [k]: h is RMS-normalized with this weight first
  float eps = 1e-6f;
};

// Returns the output tensor (shape of x).
graph::TensorId add_gated_add(graph::Graph& g, const GatedAddDesc& d);

constexpr uint32_t kGatedAddWorkgroup = 256;  // gated_add.wgsl WG (ops/kernel_constants.cpp writes it)

struct GatedAddParams {
  uint32_t n_rows;  // live rows
  uint32_t n;       // columns of x, y and out
  uint32_t k;       // columns of h, values of w
  float eps;        // the norm's (NORM)
};
static_assert(sizeof(GatedAddParams) == 16);
extern const ParamLayout kGatedAddLayout;

struct GatedAddInferCtx {
  graph::Shape x, y, h;
};
graph::Shape infer_gated_add(const GatedAddInferCtx& c);

struct GatedAddPlanCtx {
  graph::Shape x, h;
  float eps;
  uint32_t max_groups_per_dim;
};
void plan_gated_add(const GatedAddPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
