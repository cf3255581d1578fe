#include "ops/norm/norm.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_rows", offsetof(RmsNormParams, n_rows)},
                                  {"row_size", offsetof(RmsNormParams, row_size)},
                                  {"eps", offsetof(RmsNormParams, eps)},
                                  {"_pad0", offsetof(RmsNormParams, _pad0)}};
}  // namespace

const ParamLayout kRmsNormLayout{"rms_norm", sizeof(RmsNormParams), kFields};

graph::Shape infer_rms_norm(const RmsNormInferCtx& c) {
  if (c.x.rank < 1 || c.row_size == 0 || c.x[c.x.rank - 1] % c.row_size != 0)
    throw std::invalid_argument(fmt::format("rms_norm: rows of {} do not divide x {}",
                                            c.row_size, graph::to_string(c.x)));
  return c.x;
}

void plan_rms_norm(const RmsNormPlanCtx& c, graph::Plan& plan) {
  RmsNormParams p{};
  p.n_rows = uint32_t(c.x.numel() / c.row_size);
  p.row_size = c.row_size;
  p.eps = c.eps;
  plan.params[0].set(p);
  plan.grids[0] = grid_1d(p.n_rows, c.max_groups_per_dim);  // a workgroup per row
}

graph::TensorId add_rms_norm(graph::Graph& g, const RmsNormDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const graph::Tensor& w = graph::tensor_info(g, d.weight);
  if (x.dtype != graph::DType::F32 || w.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: rms_norm takes f32 x and weight", d.name));
  if (x.max_shape.rank < 1)
    throw std::invalid_argument(fmt::format("{}: x needs rank >= 1", d.name));
  uint32_t row = d.row_size ? d.row_size : x.max_shape[x.max_shape.rank - 1];
  infer_rms_norm({x.max_shape, row});
  if (w.max_shape != graph::Shape{row})
    throw std::invalid_argument(fmt::format("{}: weight is {}, expected [{}]", d.name,
                                            graph::to_string(w.max_shape), row));
  if (!(d.eps >= 0.f))
    throw std::invalid_argument(fmt::format("{}: eps must be >= 0, got {}", d.name, d.eps));
  constexpr uint32_t wg = kRmsNormWorkgroup;  // its reduction array and total
  require_fits(graph::device_caps(g).limits, d.name + ": rms_norm", {wg_var_bytes(wg * 4) + wg_var_bytes(4), wg});
  if (d.residual) {
    const graph::Tensor& r = graph::tensor_info(g, *d.residual);
    if (r.dtype != graph::DType::F32 || r.max_shape != x.max_shape)
      throw std::invalid_argument(fmt::format("{}: residual is {} {}, expected f32 {} (x's shape)", d.name,
                                              graph::dtype_name(r.dtype), graph::to_string(r.max_shape),
                                              graph::to_string(x.max_shape)));
    if (d.enable) throw std::invalid_argument(fmt::format("{}: a switched norm takes no residual", d.name));
  }
  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, x.max_shape);

  graph::KernelSpec k{gpu::make_key("rms_norm", d.residual ? "rms_norm_res" : "rms_norm"),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, d.weight), graph::Binding::of(2, y),
                       graph::Binding::params(3)}};
  if (d.residual) k.bindings.push_back(graph::Binding::of(4, *d.residual));
  std::vector<graph::TensorId> inputs = {d.x, d.weight};
  if (d.residual) inputs.push_back(*d.residual);
  if (d.enable && (d.enable->v >= graph::symbol_count(g) || graph::symbol_info(g, *d.enable).lo != 0 ||
                   graph::symbol_info(g, *d.enable).hi != 1))
    throw std::invalid_argument(fmt::format("{}: the enable symbol must range over [0, 1]", d.name));
  float eps = d.eps;
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "rms_norm",
      .inputs = std::move(inputs),
      .outputs = {y},
      .dynamic = true,
      .routes = d.enable ? graph::RouteSet{graph::RouteKey::of_symbol(*d.enable),
                                           {{kRmsNormOff, "off", 0, 0, {}, /*idle=*/true},
                                            {kRmsNormOn, "on", 1, 1, {k}}}}
                         : graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, x.max_shape[0], {k}),
      .infer =
          [row, name = d.name](const graph::InferArgs& a) {
            if (a.in.size() > 2 && a.in[2] != a.in[0])
              throw std::invalid_argument(fmt::format("{}: residual {} is not x's {}", name,
                                                      graph::to_string(a.in[2]), graph::to_string(a.in[0])));
            a.out[0] = infer_rms_norm({a.in[0], row});
          },
      .plan =
          [row, eps, switched = d.enable.has_value()](const graph::PlanArgs& a, graph::Plan& p) {
            if (switched && a.route_is(kRmsNormOff)) return;  // no kernel, no uniform block to write
            plan_rms_norm({a.in[0], row, eps, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
  });
  return y;
}

}  // namespace wgrt::ops
