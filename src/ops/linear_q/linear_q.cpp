#include "ops/linear_q/linear_q.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {
    {"m", offsetof(LinearQParams, m)},       {"n", offsetof(LinearQParams, n)},
    {"k", offsetof(LinearQParams, k)},       {"gs", offsetof(LinearQParams, gs)},
    {"has_bias", offsetof(LinearQParams, has_bias)}, {"pad0", offsetof(LinearQParams, pad0)},
    {"pad1", offsetof(LinearQParams, pad1)}, {"pad2", offsetof(LinearQParams, pad2)}};
constexpr uint32_t kWg = 256;  // linear_q.wgsl WG
constexpr uint32_t kRpt = 4;   // linear_q.wgsl RPT
constexpr uint32_t kSmallK = 32;  // linear_q.wgsl SK

// GEMV threads along K (TK): enough workgroups to fill a large GPU (aim for 512), but no more
// threads along K than the row has vec4 steps.
uint32_t gemv_tk(QuantFormat f, uint32_t n, uint32_t k) {
  const uint32_t steps = k / (f == QuantFormat::Q4gsw ? 32 : 16);
  uint32_t tk = 32;
  while (tk < kWg && tk * 2 <= steps && ceil_div(n, kRpt * (kWg / tk)) < 512) tk *= 2;
  return tk;
}
}  // namespace

const ParamLayout kLinearQLayout{"linear_q", sizeof(LinearQParams), kFields};

graph::Shape infer_linear_q(const LinearQInferCtx& c) {
  if (c.x.rank != 2 || c.x[1] != c.k)
    throw std::invalid_argument(
        fmt::format("linear_q: x {} does not have K = {} columns", graph::to_string(c.x), c.k));
  return graph::Shape{c.x[0], c.n};
}

void plan_linear_q(const LinearQPlanCtx& c, graph::Plan& plan) {
  LinearQParams params{c.m, c.n, c.k, c.gs, c.has_bias ? 1u : 0u, 0, 0, 0};
  plan.params[0].set(params);
  switch (c.route) {
    case kLinearQGemv:
      plan.grids[0] = grid_1d(ceil_div(c.n, c.gemv_rows_per_wg), c.max_groups_per_dim);
      break;
    case kLinearQSmallM:
      plan.grids[0] = grid_1d(ceil_div(c.n, kRpt * (kWg / kSmallK)), c.max_groups_per_dim);
      break;
    default:
      plan.params[1].set(params);
      plan.grids[0] = grid_1d(ceil_div(uint64_t(c.m) * (c.k / c.gs), 64), c.max_groups_per_dim);
      plan.grids[1] = {uint32_t(ceil_div(c.n, kLinearQGemmBN)), uint32_t(ceil_div(c.m, kLinearQGemmBM)), 1};
      break;
  }
}

QuantTensors add_quant_weight(graph::Graph& g, const std::string& name, QuantFormat f, uint32_t n,
                              uint32_t k, uint32_t gs) {
  check_quant_shape(n, k, gs, name.c_str());
  QuantTensors t;
  t.q = graph::add_weight(g, {.name = name + ".q", .dtype = graph::DType::U32,
                              .shape = {n, k / values_per_word(f)}});
  t.scales = graph::add_weight(g, {.name = name + ".scales", .dtype = graph::DType::F16,
                                   .shape = {n, k / gs}});
  return t;
}

void write_quant_weight(graph::Graph& g, const QuantTensors& t, const QuantWeight& w) {
  graph::write_tensor<uint32_t>(g, t.q, w.q);
  graph::write_tensor<uint32_t>(g, t.scales, w.scales);
}

graph::TensorId add_linear_q(graph::Graph& g, const LinearQDesc& d) {
  const graph::Tensor& x = g.tensors.at(d.x.v);
  const graph::Tensor& q = g.tensors.at(d.q.v);
  const graph::Tensor& s = g.tensors.at(d.scales.v);
  const char* fmt_name = quant_format_name(d.format);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: linear_q takes f32 x [M, K]", d.name));
  const uint32_t max_m = x.max_shape[0], k = x.max_shape[1];
  if (q.dtype != graph::DType::U32 || q.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: {} weight words must be a u32 [N, K/{}] tensor",
                                            d.name, fmt_name, values_per_word(d.format)));
  const uint32_t n = q.max_shape[0];
  check_quant_shape(n, k, d.gs, d.name.c_str());
  if (q.max_shape[1] != k / values_per_word(d.format))
    throw std::invalid_argument(fmt::format("{}: {} weight {} does not match K = {} (want [{}, {}])",
                                            d.name, fmt_name, graph::to_string(q.max_shape), k, n,
                                            k / values_per_word(d.format)));
  if (s.dtype != graph::DType::F16 || s.max_shape != graph::Shape{n, k / d.gs})
    throw std::invalid_argument(fmt::format("{}: scales must be f16 [{}, {}], not {} {}", d.name, n,
                                            k / d.gs, graph::dtype_name(s.dtype),
                                            graph::to_string(s.max_shape)));
  if (d.bias && (g.tensors.at(d.bias->v).dtype != graph::DType::F32 ||
                 g.tensors.at(d.bias->v).max_shape != graph::Shape{n}))
    throw std::invalid_argument(fmt::format("{}: bias must be f32 [{}]", d.name, n));

  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, {max_m, n});
  graph::TensorId bias = d.bias.value_or(d.scales);  // bound but unread when there is none
  const double bits = d.format == QuantFormat::Q4gsw ? 4 : 8;
  const uint32_t tk = gemv_tk(d.format, n, k);
  auto key = [&](const char* entry, std::vector<gpu::OverrideConstant> extra = {}) {
    extra.push_back({"BITS", bits});
    return gpu::make_key("linear_q", entry, std::move(extra));
  };
  using graph::Binding;
  graph::RouteSet routes{graph::RouteKey::of_dim(d.x, 0), {}};
  routes.routes.push_back(
      {"gemv", 1, 1,
       {{key("gemv", {{"TK", double(tk)}}),
         {Binding::of(0, d.x), Binding::of(1, d.q), Binding::of(2, d.scales), Binding::of(3, bias),
          Binding::of(4, y), Binding::params(5)}}}});
  if (max_m >= 2)
    routes.routes.push_back(
        {"small_m", 2, std::min<int64_t>(7, max_m),
         {{key("small_m"),
           {Binding::of(0, d.x), Binding::of(8, d.q), Binding::of(2, d.scales), Binding::of(3, bias),
            Binding::of(4, y), Binding::params(5)}}}});
  std::vector<graph::TensorId> outputs = {y};
  if (max_m >= 8) {
    graph::TensorId xq = graph::add_tensor(g, d.name + ".xq", graph::DType::U32, {max_m, k / 4});
    graph::TensorId xs = graph::add_tensor(g, d.name + ".xs", graph::DType::F32, {max_m, k / d.gs});
    outputs.push_back(xq);
    outputs.push_back(xs);
    routes.routes.push_back(
        {"gemm", 8, max_m,
         {{key("quantize_act"),
           {Binding::of(0, d.x), Binding::params(5), Binding::of(6, xq), Binding::of(7, xs)}},
          {key("gemm"),
           {Binding::of(8, d.q), Binding::of(2, d.scales), Binding::of(3, bias), Binding::of(4, y),
            Binding::params(5), Binding::of(6, xq), Binding::of(7, xs)}}}});
  }

  const bool has_bias = d.bias.has_value();
  std::vector<graph::TensorId> inputs = {d.x, d.q, d.scales};
  if (has_bias) inputs.push_back(*d.bias);
  const uint32_t gs = d.gs, rows_per_wg = kRpt * (kWg / tk);
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = std::string("linear_") + fmt_name,
      .inputs = inputs,
      .outputs = outputs,
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [n, k, gs](const graph::InferArgs& a) {
            a.out[0] = infer_linear_q({a.in[0], n, k});
            if (a.out.size() > 1) {  // activation scratch follows the live rows
              a.out[1] = graph::Shape{a.in[0][0], k / 4};
              a.out[2] = graph::Shape{a.in[0][0], k / gs};
            }
          },
      .plan =
          [n, k, gs, has_bias, rows_per_wg](const graph::PlanArgs& a, graph::Plan& p) {
            plan_linear_q({a.in[0][0], n, k, gs, has_bias, a.route, rows_per_wg,
                           a.caps->limits.maxComputeWorkgroupsPerDimension},
                          p);
          },
  });
  return y;
}

}  // namespace wgrt::ops
