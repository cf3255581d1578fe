#include "ops/slice/slice.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"first_row", offsetof(SliceParams, first_row)},
                                  {"rows", offsetof(SliceParams, rows)},
                                  {"cols", offsetof(SliceParams, cols)},
                                  {"_pad0", offsetof(SliceParams, _pad0)}};
}  // namespace

const ParamLayout kSliceLayout{"slice", sizeof(SliceParams), kFields};

graph::Shape infer_last_rows(const LastRowsInferCtx& c) {
  if (c.x.rank != 2) throw std::invalid_argument(fmt::format("last_rows: x {} is not 2-D", graph::to_string(c.x)));
  return graph::Shape{std::min(c.x[0], c.count), c.x[1]};
}

void plan_last_rows(const LastRowsPlanCtx& c, graph::Plan& plan) {
  SliceParams p{c.x[0] - c.out[0], c.out[0], c.out[1], 0};
  plan.params[0].set(p);
  plan.grids[0] = grid_1d(ceil_div(uint64_t(p.rows) * p.cols, 256), c.max_groups_per_dim);
}

graph::TensorId add_last_rows(graph::Graph& g, const LastRowsDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  if (x.dtype != graph::DType::F32 || d.count == 0)
    throw std::invalid_argument(fmt::format("{}: last_rows takes f32 x and count >= 1", d.name));
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, infer_last_rows({x.max_shape, d.count}));
  graph::KernelSpec k{gpu::make_key("slice", "last_rows"),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, out), graph::Binding::params(2)}};
  uint32_t count = d.count;
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "last_rows",
      .inputs = {d.x},
      .outputs = {out},
      .routes = graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, x.max_shape[0], {k}),
      .infer = [count](const graph::InferArgs& a) { a.out[0] = infer_last_rows({a.in[0], count}); },
      .plan =
          [](const graph::PlanArgs& a, graph::Plan& p) {
            plan_last_rows({a.in[0], a.out[0], a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
  });
  return out;
}

graph::TensorId add_gather_rows(graph::Graph& g, const GatherRowsDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const graph::Tensor& rows = graph::tensor_info(g, d.rows);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: gather_rows takes f32 x [rows, cols]", d.name));
  if (rows.dtype != graph::DType::U32 || rows.max_shape.rank != 1)
    throw std::invalid_argument(fmt::format("{}: gather_rows takes u32 row indices [n]", d.name));
  const uint32_t cols = x.max_shape[1];
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, {rows.max_shape[0], cols});
  graph::KernelSpec k{gpu::make_key("slice", "gather_rows"),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, out), graph::Binding::params(2),
                       graph::Binding::of(3, d.rows)}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "gather_rows",
      .inputs = {d.x, d.rows},
      .outputs = {out},
      .routes = graph::single_route(graph::RouteKey::of_dim(d.rows, 0), 1, rows.max_shape[0], {k}),
      .infer = [cols](const graph::InferArgs& a) { a.out[0] = graph::Shape{a.in[1][0], cols}; },
      .plan =
          [](const graph::PlanArgs& a, graph::Plan& p) {
            SliceParams sp{a.in[0][0], a.out[0][0], a.out[0][1], 0};
            p.params[0].set(sp);
            p.grids[0] = grid_1d(ceil_div(uint64_t(sp.rows) * sp.cols, 256), a.caps->limits.maxComputeWorkgroupsPerDimension);
          },
  });
  return out;
}

}  // namespace wgrt::ops
