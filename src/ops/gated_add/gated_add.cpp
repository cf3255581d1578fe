#include "ops/gated_add/gated_add.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_rows", offsetof(GatedAddParams, n_rows)},
                                  {"n", offsetof(GatedAddParams, n)},
                                  {"k", offsetof(GatedAddParams, k)},
                                  {"eps", offsetof(GatedAddParams, eps)}};
}  // namespace

const ParamLayout kGatedAddLayout{"gated_add", sizeof(GatedAddParams), kFields};

graph::Shape infer_gated_add(const GatedAddInferCtx& c) {
  if (c.x.rank != 2 || c.y != c.x)
    throw std::invalid_argument(fmt::format("gated_add: x {} and y {} are not one [n_tokens, n] shape",
                                            graph::to_string(c.x), graph::to_string(c.y)));
  if (c.h.rank != 2 || c.h[0] != c.x[0])
    throw std::invalid_argument(fmt::format("gated_add: h {} is not [n_tokens, k] for x {}", graph::to_string(c.h),
                                            graph::to_string(c.x)));
  return c.x;
}

void plan_gated_add(const GatedAddPlanCtx& c, graph::Plan& plan) {
  GatedAddParams p{};
  p.n_rows = c.x[0];
  p.n = c.x[1];
  p.k = c.h[1];
  p.eps = c.eps;
  plan.params[0].set(p);
  plan.grids[0] = grid_1d(c.x[0], c.max_groups_per_dim);
}

graph::TensorId add_gated_add(graph::Graph& g, const GatedAddDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const graph::Tensor& y = graph::tensor_info(g, d.y);
  const graph::Tensor& h = graph::tensor_info(g, d.h);
  const graph::Tensor& w = graph::tensor_info(g, d.w);
  for (const graph::Tensor* t : {&x, &y, &h, &w})
    if (t->dtype != graph::DType::F32)
      throw std::invalid_argument(fmt::format("{}: gated_add takes f32 tensors; {} is {}", d.name, t->name,
                                              graph::dtype_name(t->dtype)));
  infer_gated_add({x.max_shape, y.max_shape, h.max_shape});
  for (const std::optional<graph::TensorId>& v : {std::optional(d.w), d.norm})
    if (v && graph::tensor_info(g, *v).max_shape != graph::Shape{h.max_shape[1]})
      throw std::invalid_argument(fmt::format("{}: {} is {}, expected [{}] (h's columns)", d.name,
                                              graph::tensor_info(g, *v).name,
                                              graph::to_string(graph::tensor_info(g, *v).max_shape), h.max_shape[1]));
  if (d.norm && (graph::tensor_info(g, *d.norm).dtype != graph::DType::F32 || !(d.eps > 0)))
    throw std::invalid_argument(fmt::format("{}: the norm takes an f32 weight and an epsilon above 0 ({})", d.name,
                                            d.eps));
  constexpr uint32_t wg = kGatedAddWorkgroup;  // its reduction array and total
  require_fits(graph::device_caps(g).limits, d.name + ": gated_add", {wg_var_bytes(wg * 8) + wg_var_bytes(4), wg});
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, x.max_shape);
  graph::KernelSpec k{gpu::make_key("gated_add", "gated_add", {{"NORM", d.norm ? 1.0 : 0.0}}),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, d.y), graph::Binding::of(2, d.h),
                       graph::Binding::of(3, d.w), graph::Binding::of(4, out), graph::Binding::params(5),
                       graph::Binding::of(6, d.norm.value_or(d.w))}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "gated_add",
      .inputs = d.norm ? std::vector<graph::TensorId>{d.x, d.y, d.h, d.w, *d.norm}
                       : std::vector<graph::TensorId>{d.x, d.y, d.h, d.w},
      .outputs = {out},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, x.max_shape[0], {k}),
      .infer = [](const graph::InferArgs& a) { a.out[0] = infer_gated_add({a.in[0], a.in[1], a.in[2]}); },
      .plan =
          [eps = d.eps](const graph::PlanArgs& a, graph::Plan& p) {
            plan_gated_add({a.in[0], a.in[2], eps, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
  });
  return out;
}

}  // namespace wgrt::ops
