// linear_q's mixture-of-experts node (linear_q.h add_linear_q_experts): one route, the gemv's
// row loops over the chosen experts' rows (linear_q_gemv_entries.wgsl gemv_experts).
#include <fmt/format.h>

#include <stdexcept>

#include "ops/linear_q/linear_q_build.h"
#include "ops/moe/moe.h"

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

uint64_t linear_q_detail::experts_routed_workgroup_bytes(uint32_t lanes) {
  return gemv_workgroup_bytes(lanes, 1) + 2 * uint64_t(kMoeMaxExperts) * 4 + 2 * 16;  // rt_key4, rt_rank; rt_pick, rt_top
}

namespace {

// Whether the routed gate|up kernel fits the device's workgroup memory.
bool routed_fits(const LinearQBuild& b) {
  return experts_routed_workgroup_bytes(gemv_lanes(b.caps, b.n, b.d.gemv_lanes, b.d.name, 1)) <=
         b.caps.limits.maxComputeWorkgroupStorageSize;
}

// The node of add_linear_q_experts, or with `route` of add_linear_q_experts_routed: ids and
// weights are then its outputs, its pairs the live tokens times the slots.
ExpertsRouted experts_node(graph::Graph& g, const LinearQExpertsDesc& d, const MoeRouteDesc* route) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const uint32_t k = x.max_shape.rank == 2 ? x.max_shape[1] : 0;
  const LinearQPart wp{d.format, d.gs, d.q, d.scales};
  const uint32_t n = check_part(g, wp, k, d.name);
  ExpertsRouted out{};
  uint32_t e = 0;
  if (route) {
    const graph::Tensor& l = graph::tensor_info(g, route->logits);
    if (!d.swiglu || d.x_div != route->n_used || l.max_shape.rank != 2 || l.max_shape[0] != x.max_shape[0])
      throw std::invalid_argument(fmt::format("{}: the routed experts' node is gate|up (swiglu) with a row of x and "
                                              "of logits per token and x_div = the {} slots", d.name, route->n_used));
    e = l.max_shape[1];
    check_moe_route(d.name, e, route->n_used);
    const uint32_t pairs = x.max_shape[0] * route->n_used;
    out.ids = graph::add_tensor(g, route->name + ".ids", graph::DType::U32, {pairs});
    out.weights = graph::add_tensor(g, route->name + ".weights", graph::DType::F32, {pairs});
  }
  const graph::TensorId ids = route ? out.ids : d.ids;
  LinearQExpertsDesc checked = d;
  checked.ids = ids;
  check_experts(g, checked, n);
  const uint32_t max_pairs = graph::tensor_info(g, ids).max_shape[0];
  const uint32_t n_out = d.swiglu ? d.n_expert / 2 : d.n_expert;
  // The gemv's kernel choices, as for a node of one expert's rows.
  const LinearQDesc as_gemv{.name = d.name, .format = d.format, .gs = d.gs, .x = d.x, .q = d.q, .scales = d.scales,
                            .swiglu = d.swiglu, .act = d.act, .gemv_lanes = d.gemv_lanes,
                            .gemv_int8 = d.gemv_int8};
  LinearQBuild b{.g = g, .d = as_gemv, .caps = graph::device_caps(g), .max_m = max_pairs, .k = k, .n = d.n_expert};
  out.y = graph::add_tensor(g, d.name, graph::DType::F32, {max_pairs, n_out});
  const char* entry = d.swiglu ? "gemv_experts_swiglu" : "gemv_experts";
  using graph::Binding;
  const std::vector<Binding> common = {Binding::of(0, d.x), Binding::of(1, d.q), Binding::of(2, d.scales),
                                       Binding::of(4, out.y), Binding::params(5), Binding::of(10, d.norm.value_or(d.x))};
  auto with = [&](std::initializer_list<Binding> more) {
    std::vector<Binding> bs = common;
    bs.insert(bs.end(), more);
    return bs;
  };
  graph::KernelSpec kernel{gemv_key(b, wp, entry, d.norm.has_value()), with({Binding::of(16, ids)})};
  graph::RouteSet routes{graph::RouteKey::of_dim(route ? d.x : ids, 0), {}};
  const uint32_t max_rows = route ? x.max_shape[0] : max_pairs;
  uint32_t routed_hi = 0;  // the most tokens the kernel routes itself
  if (!route) {
    routes.routes.push_back({kLinearQExperts, "experts", 1, max_rows, {std::move(kernel)}});
  } else {
    // Few tokens: each workgroup routes its token itself (no dispatch of its own). More: moe_route
    // first, as every workgroup's ranking would cost more than the dispatch.
    routed_hi = routed_fits(b) ? std::min(kExpertsRoutedMaxTokens, max_rows) : 0;
    if (routed_hi)
      routes.routes.push_back(
          {kLinearQExpertsRouted, "experts_routed", 1, routed_hi,
           {{gemv_key(b, wp, "gemv_experts_swiglu_route", d.norm.has_value()),
             with({Binding::of(17, route->logits), Binding::of(18, out.ids), Binding::of(19, out.weights)})}}});
    if (routed_hi < max_rows)
      routes.routes.push_back({kLinearQExperts, "experts", routed_hi + 1, max_rows,
                               {{gpu::make_key("moe", "moe_route"),
                                 {Binding::of(0, route->logits), Binding::of(1, out.ids),
                                  Binding::of(2, out.weights), Binding::params(3)}},
                                std::move(kernel)}});
  }

  const uint64_t expert_bytes = quant_bytes(d.format, d.n_expert, k, d.gs);
  const uint32_t gs = activation_group(d.format, d.gs);
  const uint32_t slots = route ? route->n_used : 0;
  const bool route_norm = route && route->norm;
  std::vector<graph::TensorId> inputs = {d.x, d.q, d.scales};
  inputs.push_back(route ? route->logits : d.ids);
  if (d.norm) inputs.push_back(*d.norm);
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = std::string("linear_") + quant_format_name(d.format) + "_experts",
      .inputs = inputs,
      .outputs = route ? std::vector<graph::TensorId>{out.y, out.ids, out.weights} : std::vector<graph::TensorId>{out.y},
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [name = d.name, n_out, x_div = d.x_div, slots](const graph::InferArgs& a) {
            const uint32_t pairs = slots ? a.in[0][0] * slots : a.in[3][0];
            if (uint64_t(a.in[0][0]) * x_div < pairs)
              throw std::invalid_argument(fmt::format("{}: {} pairs past {} live rows of x at {} a row", name, pairs,
                                                      a.in[0][0], x_div));
            a.out[0] = graph::Shape{pairs, n_out};
            if (slots) a.out[1] = a.out[2] = graph::Shape{pairs};
          },
      .plan =
          [n, k, gs, e, slots, route_norm, routed_hi, n_expert = d.n_expert, x_div = d.x_div,
           eps = d.eps](const graph::PlanArgs& a, graph::Plan& p) {
            const uint32_t pairs = slots ? a.in[0][0] * slots : a.in[3][0];
            size_t i = 0;
            if (slots && a.in[0][0] > routed_hi) {  // the experts route: moe_route first
              p.params[0].set(MoeParams{.m = a.in[0][0], .e = e, .k = slots, .n = 0, .norm = route_norm ? 1u : 0u});
              p.grids[0] = grid_1d(a.in[0][0], a.caps->limits.maxComputeWorkgroupsPerDimension);
              i = 1;
            }
            p.params[i].set(LinearQParams{.m = pairs, .n = n, .k = k, .gs = gs, .has_bias = 0, .x_row = 0,
                                          .eps = eps, .y_off = 0, .ld = n_expert, .pos_sym = 0, .n_ctx = 0,
                                          .kslice = k, .ex_n = n_expert, .ex_xdiv = x_div, .ex_e = e,
                                          .ex_norm = route_norm ? 1u : 0u});
            const uint64_t tiles = ceil_div(n_expert, kLinearQGemvRows);  // 16 rows (swiglu: 8 outputs) a workgroup
            p.grids[i] = grid_1d(tiles * pairs, a.caps->limits.maxComputeWorkgroupsPerDimension);
          },
      .cost =
          [k, n_out, expert_bytes, slots](const graph::PlanArgs& a) {
            // Each pair reads its expert's rows (pairs sharing one read it from L2 after the first).
            const uint64_t pairs = slots ? uint64_t(a.in[0][0]) * slots : a.in[3][0];
            return graph::NodeCost{pairs * (expert_bytes + k * 4 + n_out * 4), 2.0 * double(pairs) * n_out * k};
          },
  });
  return out;
}

}  // namespace

graph::TensorId add_linear_q_experts(graph::Graph& g, const LinearQExpertsDesc& d) {
  return experts_node(g, d, nullptr).y;
}

ExpertsRouted add_linear_q_experts_routed(graph::Graph& g, const LinearQExpertsDesc& d, const MoeRouteDesc& route) {
  return experts_node(g, d, &route);
}

}  // namespace wgrt::ops
