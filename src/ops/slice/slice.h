// last_rows: out = the last `count` live rows of x [n_tokens, cols] f32 (fewer when
// n_tokens < count). The model keeps only the last token's hidden state before the output
// projection when it does not need every position's logits.
// gather_rows: out[j] = x[rows[j]] for the live entries of `rows` (u32, an input written per
// step): a step that mixes sequences keeps the last row of each sequence that wants logits.
// An index past x's live rows reads its last row (plan cannot see the indices; the caller
// checks them).
#pragma once

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct LastRowsDesc {
  std::string name;  // node and output name, e.g. "last_hidden"
  graph::TensorId x;  // [n_tokens, cols] f32
  uint32_t count = 1;
};

graph::TensorId add_last_rows(graph::Graph& g, const LastRowsDesc& d);

struct GatherRowsDesc {
  std::string name;     // node and output name, e.g. "out_hidden"
  graph::TensorId x;    // [n_tokens, cols] f32
  graph::TensorId rows; // u32 [max_rows] input, live dim 0 = the output's rows
};

graph::TensorId add_gather_rows(graph::Graph& g, const GatherRowsDesc& d);

struct SliceParams {
  uint32_t first_row;  // last_rows: live rows - output rows; gather_rows: x's live rows
  uint32_t rows;       // output rows
  uint32_t cols;
  uint32_t _pad0;
};
static_assert(sizeof(SliceParams) == 16);
extern const ParamLayout kSliceLayout;

struct LastRowsInferCtx {
  graph::Shape x;
  uint32_t count;
};
graph::Shape infer_last_rows(const LastRowsInferCtx& c);

struct LastRowsPlanCtx {
  graph::Shape x, out;
  uint32_t max_groups_per_dim;
};
void plan_last_rows(const LastRowsPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
