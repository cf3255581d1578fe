// linear_q's mixture-of-experts node (linear_q.h add_linear_q_experts): one route, the gemv's
// row loops over the chosen experts' rows (linear_q_gemv_entries.wgsl gemv_experts).
#include <fmt/format.h>

#include <stdexcept>

#include "ops/linear_q/linear_q_build.h"

namespace wgrt::ops {

using namespace linear_q_detail;

namespace {

void check_experts(const graph::Graph& g, const LinearQExpertsDesc& d, uint32_t n) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const graph::Tensor& ids = graph::tensor_info(g, d.ids);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: the experts' linear takes f32 x [rows, K]", d.name));
  if (ids.dtype != graph::DType::U32 || ids.max_shape.rank != 1)
    throw std::invalid_argument(fmt::format("{}: the experts' ids must be u32 [pairs]", d.name));
  if (d.n_expert == 0 || n % d.n_expert != 0)
    throw std::invalid_argument(fmt::format("{}: the weight's {} rows are not whole experts of {} rows", d.name, n,
                                            d.n_expert));
  if (d.x_div == 0 || uint64_t(x.max_shape[0]) * d.x_div < ids.max_shape[0])
    throw std::invalid_argument(fmt::format("{}: {} pairs need {} rows of x at {} pairs a row, x has {}", d.name,
                                            ids.max_shape[0], ceil_div(ids.max_shape[0], d.x_div), d.x_div,
                                            x.max_shape[0]));
  if (d.swiglu && d.n_expert % 32 != 0)
    throw std::invalid_argument(fmt::format("{}: an expert's (gate, up) rows come in blocks of 16 pairs (n_expert = "
                                            "{} is not a multiple of 32)", d.name, d.n_expert));
  if (d.norm && graph::tensor_info(g, *d.norm).max_shape != graph::Shape{x.max_shape[1]})
    throw std::invalid_argument(fmt::format("{}: the norm weight must have shape [{}]", d.name, x.max_shape[1]));
  if (d.act != GateAct::Silu && !d.swiglu)
    throw std::invalid_argument(fmt::format("{}: a gate activation needs swiglu", d.name));
}

}  // namespace

graph::TensorId add_linear_q_experts(graph::Graph& g, const LinearQExpertsDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const uint32_t k = x.max_shape.rank == 2 ? x.max_shape[1] : 0;
  const LinearQPart wp{d.format, d.gs, d.q, d.scales};
  const uint32_t n = check_part(g, wp, k, d.name);
  check_experts(g, d, n);
  const uint32_t max_pairs = graph::tensor_info(g, d.ids).max_shape[0];
  const uint32_t n_out = d.swiglu ? d.n_expert / 2 : d.n_expert;
  // The gemv's kernel choices, as for a node of one expert's rows.
  const LinearQDesc as_gemv{.name = d.name, .format = d.format, .gs = d.gs, .x = d.x, .q = d.q, .scales = d.scales,
                            .swiglu = d.swiglu, .act = d.act, .gemv_int8 = d.gemv_int8};
  LinearQBuild b{.g = g, .d = as_gemv, .caps = graph::device_caps(g), .max_m = max_pairs, .k = k, .n = d.n_expert};
  const graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, {max_pairs, n_out});
  const char* entry = d.swiglu ? "gemv_experts_swiglu" : "gemv_experts";
  using graph::Binding;
  graph::KernelSpec kernel{gemv_key(b, wp, entry, d.norm.has_value()),
                           {Binding::of(0, d.x), Binding::of(1, d.q), Binding::of(2, d.scales), Binding::of(4, y),
                            Binding::params(5), Binding::of(10, d.norm.value_or(d.x)), Binding::of(16, d.ids)}};
  graph::RouteSet routes{graph::RouteKey::of_dim(d.ids, 0), {}};
  routes.routes.push_back({kLinearQExperts, "experts", 1, max_pairs, {std::move(kernel)}});

  const uint64_t expert_bytes = quant_bytes(d.format, d.n_expert, k, d.gs);
  const uint32_t gs = activation_group(d.format, d.gs);
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = std::string("linear_") + quant_format_name(d.format) + "_experts",
      .inputs = d.norm ? std::vector<graph::TensorId>{d.x, d.ids, d.q, d.scales, *d.norm}
                       : std::vector<graph::TensorId>{d.x, d.ids, d.q, d.scales},
      .outputs = {y},
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [name = d.name, n_out, x_div = d.x_div](const graph::InferArgs& a) {
            const uint32_t pairs = a.in[1][0];
            if (uint64_t(a.in[0][0]) * x_div < pairs)
              throw std::invalid_argument(fmt::format("{}: {} pairs past {} live rows of x at {} a row", name, pairs,
                                                      a.in[0][0], x_div));
            a.out[0] = graph::Shape{pairs, n_out};
          },
      .plan =
          [n, k, gs, n_expert = d.n_expert, x_div = d.x_div, eps = d.eps](const graph::PlanArgs& a,
                                                                              graph::Plan& p) {
            if (!a.route_is(kLinearQExperts)) return;
            const uint32_t pairs = a.in[1][0];
            p.params[0].set(LinearQParams{.m = pairs, .n = n, .k = k, .gs = gs, .has_bias = 0, .x_row = 0,
                                          .eps = eps, .y_off = 0, .ld = n_expert, .pos_sym = 0, .n_ctx = 0,
                                          .kslice = k, .ex_n = n_expert, .ex_xdiv = x_div});
            const uint64_t tiles = ceil_div(n_expert, kLinearQGemvRows);  // 16 rows (swiglu: 8 outputs) a workgroup
            p.grids[0] = grid_1d(tiles * pairs, a.caps->limits.maxComputeWorkgroupsPerDimension);
          },
      .cost =
          [k, n_out, expert_bytes](const graph::PlanArgs& a) {
            // Each pair reads its expert's rows (pairs sharing one read it from L2 after the first).
            const uint64_t pairs = a.in[1][0];
            return graph::NodeCost{pairs * (expert_bytes + k * 4 + n_out * 4), 2.0 * double(pairs) * n_out * k};
          },
  });
  return y;
}

}  // namespace wgrt::ops
