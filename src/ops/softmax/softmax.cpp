#include "ops/softmax/softmax.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"rows", offsetof(SoftmaxParams, rows)},
                                  {"n", offsetof(SoftmaxParams, n)},
                                  {"_pad0", offsetof(SoftmaxParams, _pad0)},
                                  {"_pad1", offsetof(SoftmaxParams, _pad1)}};
}  // namespace

const ParamLayout kSoftmaxLayout{"softmax", sizeof(SoftmaxParams), kFields};

graph::Shape infer_softmax(const SoftmaxInferCtx& c) {
  if (c.x.rank != 2)
    throw std::invalid_argument(fmt::format("softmax: x {} must be [rows, n]", graph::to_string(c.x)));
  return c.x;
}

void plan_softmax(const SoftmaxPlanCtx& c, graph::Plan& plan) {
  plan.params[0].set(SoftmaxParams{c.rows, c.n, 0, 0});
  plan.grids[0] = grid_1d(c.rows, c.max_groups_per_dim);  // a workgroup per row
}

graph::TensorId add_softmax(graph::Graph& g, const SoftmaxDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  if (x.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: softmax takes f32", d.name));
  const uint32_t max_rows = x.max_shape[0];  // copied: add_tensor may add tensors
  constexpr uint32_t wg = kSoftmaxWorkgroup;  // and its reduction array
  require_fits(graph::device_caps(g).limits, d.name + ": softmax", {wg_var_bytes(wg * 4), wg});
  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, infer_softmax({x.max_shape}));
  graph::KernelSpec k{gpu::make_key("softmax", "main"),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, y), graph::Binding::params(2)}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "softmax",
      .inputs = {d.x},
      .outputs = {y},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, max_rows, {k}),
      .infer = [](const graph::InferArgs& a) { a.out[0] = infer_softmax({a.in[0]}); },
      .plan =
          [](const graph::PlanArgs& a, graph::Plan& p) {
            plan_softmax({a.in[0][0], a.in[0][1], a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
  });
  return y;
}

}  // namespace wgrt::ops
