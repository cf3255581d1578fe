// last_rows: out = the last `count` live rows of x [n_tokens, cols] f32 (fewer when
// n_tokens < count). The model keeps only the last token's hidden state before the output
// projection when it does not need every position's logits.
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

struct SliceParams {
  uint32_t first_row;  // live rows - output rows
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
