#include "ops/linear/linear.h"

#include <fmt/format.h>

#include <stdexcept>

#include "ops/norm/norm.h"

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"m", offsetof(LinearParams, m)},
                                  {"n", offsetof(LinearParams, n)},
                                  {"k", offsetof(LinearParams, k)},
                                  {"has_bias", offsetof(LinearParams, has_bias)},
                                  {"y_off", offsetof(LinearParams, y_off)},
                                  {"ld", offsetof(LinearParams, ld)},
                                  {"eps", offsetof(LinearParams, eps)},
                                  {"_pad1", offsetof(LinearParams, _pad1)}};
}  // namespace

const ParamLayout kLinearLayout{"linear", sizeof(LinearParams), kFields};

graph::Shape infer_linear(const LinearInferCtx& c) {
  if (c.x.rank != 2 || c.w.rank != 2 || c.x[1] != c.w[1])
    throw std::invalid_argument(fmt::format("linear: x {} and w {} do not agree on K",
                                            graph::to_string(c.x), graph::to_string(c.w)));
  return graph::Shape{c.x[0], c.n ? c.n : c.w[0]};
}

void plan_linear(const LinearPlanCtx& c, graph::Plan& plan) {
  uint32_t ld = 0;
  for (uint32_t r : c.rows) ld += r;
  const size_t first = c.norm_kernel ? 1 : 0;
  if (c.norm_kernel) {
    plan.params[0].set(RmsNormParams{c.m, c.k, c.eps, 0});
    plan.grids[0] = grid_1d(c.m, c.max_groups_per_dim);
  }
  uint32_t y_off = 0;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const uint32_t n = c.rows[i];
    plan.params[first + i].set(LinearParams{c.m, n, c.k, c.has_bias ? 1u : 0u, y_off, ld, c.eps, 0});
    if (c.gemv)
      plan.grids[first + i] = grid_1d(ceil_div(n, kLinearGemvRows), c.max_groups_per_dim);
    else
      plan.grids[first + i] = {uint32_t(ceil_div(n, kLinearTile)), uint32_t(ceil_div(c.m, kLinearTile)), 1};
    y_off += n;
  }
}

graph::TensorId add_linear(graph::Graph& g, const LinearDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const graph::Tensor& w = graph::tensor_info(g, d.w);
  const bool f16 = w.dtype == graph::DType::F16;
  if (x.dtype != graph::DType::F32 || (w.dtype != graph::DType::F32 && !f16))
    throw std::invalid_argument(fmt::format("{}: linear takes f32 x and f32 or f16 w", d.name));
  if (f16 && w.max_shape.rank == 2 && w.max_shape[1] % 2 != 0)
    throw std::invalid_argument(fmt::format("{}: f16 weights need an even K (whole u32 rows), not {}",
                                            d.name, w.max_shape[1]));
  std::vector<graph::TensorId> parts = {d.w};
  parts.insert(parts.end(), d.more.begin(), d.more.end());
  std::vector<uint32_t> rows;
  for (graph::TensorId t : parts) {
    const graph::Tensor& wt = graph::tensor_info(g, t);
    if (wt.dtype != w.dtype || wt.max_shape.rank != 2 || wt.max_shape[1] != w.max_shape[1])
      throw std::invalid_argument(fmt::format("{}: weight part '{}' must be [rows, {}] {} like the first", d.name,
                                              wt.name, w.max_shape[1], graph::dtype_name(w.dtype)));
    rows.push_back(wt.max_shape[0]);
  }
  uint32_t n = 0;
  for (uint32_t r : rows) n += r;
  graph::Shape out_shape = infer_linear({x.max_shape, w.max_shape, n});
  if (d.bias && graph::tensor_info(g, *d.bias).max_shape != graph::Shape{n})
    throw std::invalid_argument(fmt::format("{}: bias must have shape [{}]", d.name, n));
  const uint32_t k = w.max_shape[1];
  if (d.norm && graph::tensor_info(g, *d.norm).max_shape != graph::Shape{k})
    throw std::invalid_argument(fmt::format("{}: the norm weight must have shape [{}]", d.name, k));
  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, out_shape);
  graph::TensorId bias = d.bias.value_or(d.w);  // bound but unread when there is none
  // The gemv reads vec4 words where K is whole ones, and then normalizes x itself; elsewhere an
  // rms_norm kernel writes the normalized rows first.
  const bool vec4 = k % (f16 ? 8 : 4) == 0;
  std::optional<graph::TensorId> normed;
  if (d.norm && (!vec4 || x.max_shape[0] >= 2))
    normed = graph::add_tensor(g, d.name + ".normed", graph::DType::F32, x.max_shape);

  auto kernels = [&](bool gemv) {
    std::vector<graph::KernelSpec> ks;
    const bool prologue = d.norm && !(gemv && vec4);
    if (prologue)
      ks.push_back({gpu::make_key("rms_norm", "rms_norm"),
                    {graph::Binding::of(0, d.x), graph::Binding::of(1, *d.norm), graph::Binding::of(2, *normed),
                     graph::Binding::params(3)}});
    const graph::TensorId xin = prologue ? *normed : d.x;
    for (graph::TensorId wp : parts) {
      std::vector<graph::Binding> bs = {graph::Binding::of(2, bias), graph::Binding::of(3, y),
                                        graph::Binding::params(4)};
      if (gemv && vec4)  // x and w as vec4s
        bs.insert(bs.end(), {graph::Binding::of(5, d.norm.value_or(xin)), graph::Binding::of(6, xin),
                             graph::Binding::of(7, wp)});
      else
        bs.insert(bs.end(), {graph::Binding::of(0, xin), graph::Binding::of(1, wp)});
      const char* entry = !gemv ? "tiled" : vec4 ? "gemv_vec4" : "gemv";
      gpu::PipelineKey key = gemv && vec4 ? gpu::make_key("linear", entry, {{"F16", f16 ? 1.0 : 0.0},
                                                                            {"NORM", d.norm ? 1.0 : 0.0}})
                                          : gpu::make_key("linear", entry, {{"F16", f16 ? 1.0 : 0.0}});
      ks.push_back({std::move(key), std::move(bs)});
    }
    return ks;
  };
  graph::RouteSet routes{graph::RouteKey::of_dim(d.x, 0), {}};
  routes.routes.push_back({kLinearGemv, "gemv", 1, 1, kernels(true)});
  if (x.max_shape[0] >= 2) routes.routes.push_back({kLinearTiled, "tiled", 2, x.max_shape[0], kernels(false)});

  bool has_bias = d.bias.has_value();
  std::vector<graph::TensorId> inputs = parts;
  inputs.insert(inputs.begin(), d.x);
  if (has_bias) inputs.push_back(*d.bias);
  if (d.norm) inputs.push_back(*d.norm);
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "linear",
      .inputs = inputs,
      .outputs = normed ? std::vector<graph::TensorId>{y, *normed} : std::vector<graph::TensorId>{y},
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [n](const graph::InferArgs& a) {
            a.out[0] = infer_linear({a.in[0], a.in[1], n});
            if (a.out.size() > 1) a.out[1] = a.in[0];  // the normalized rows follow x's
          },
      .plan =
          [has_bias, rows, norm = d.norm.has_value(), vec4, eps = d.eps](const graph::PlanArgs& a,
                                                                          graph::Plan& p) {
            const bool gemv = a.route_is(kLinearGemv);
            plan_linear({a.in[0][0], a.in[0][1], rows, has_bias, gemv, a.caps->limits.maxComputeWorkgroupsPerDimension,
                         eps, norm && !(gemv && vec4)},
                        p);
          },
  });
  return y;
}

}  // namespace wgrt::ops
