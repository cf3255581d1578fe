// linear_q's mixture-of-experts node (linear_q.h add_linear_q_experts): steps of few pairs run
// the gemv's row loops over the chosen experts' rows (linear_q_gemv_entries.wgsl gemv_experts),
// longer ones a gemm per expert over the pairs moe_sort groups by expert (linear_q_matrix.wgsl
// gemm_experts), sized from the counts on the GPU.
#include <fmt/format.h>

#include <stdexcept>

#include "ops/linear_q/linear_q_build.h"
#include "ops/moe/moe.h"
#include "ops/norm/norm.h"
#include "ops/silu_mul/silu_mul.h"

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

bool linear_q_detail::experts_gemm_runs(const gpu::DeviceCaps& caps) {
  return caps.limits.maxStorageBuffersPerShaderStage >= kExpertsGemmStorageBuffers;
}

uint64_t linear_q_detail::experts_routed_workgroup_bytes(uint32_t lanes) {
  return gemv_workgroup_bytes(lanes, 1) + 2 * uint64_t(kMoeMaxExperts) * 4 + 2 * 16;  // rt_key4, rt_rank; rt_pick, rt_top
}

namespace {

// Whether the routed gate|up kernel fits the device's workgroup memory.
bool routed_fits(const LinearQBuild& b) {
  return experts_routed_workgroup_bytes(gemv_lanes(b.caps, b.n, b.d.gemv_lanes, b.d.name, 1)) <=
         b.caps.limits.maxComputeWorkgroupStorageSize;
}

// A scratch output of the grouped gemm's route and what its live shape follows: x's rows, the
// pairs, or the tile list.
struct ScratchOut {
  enum Kind : uint8_t { XRows, Pairs, Tiles };
  graph::TensorId t;
  Kind kind;
  uint32_t cols;  // 0: a vector
};

// What the node's plan needs, by value.
struct ExpertsPlan {
  uint32_t n, k, gs;
  uint32_t e;        // the router's experts (routed), else `experts`
  uint32_t experts;  // the weight's experts
  uint32_t slots;    // routed: pairs per token; 0: the ids are an input
  bool route_norm;
  uint32_t routed_hi, gemm_lo;  // the route's bounds, in tokens (routed) or pairs
  uint32_t n_expert, x_div;
  bool swiglu, norm;
  float eps;
};

// The entries of moe_sort's tile list for `pairs` pairs over e experts (linear_q_matrix.wgsl
// gemm_experts: a workgroup row per entry).
uint32_t gemm_tile_entries(uint32_t pairs, uint32_t e) {
  return uint32_t(ceil_div(pairs, kLinearQGemmBM)) + std::min(e, pairs);
}

// The grouped gemm's route: [rms_norm] quantize_act, moe_sort, gemm_experts, [silu_mul], each
// pair's row of x quantized to int8 once and the rows of one expert read by one workgroup row.
struct GemmRoute {
  std::optional<graph::TensorId> normed;
  graph::TensorId xq, xs, order, tiles;
  std::optional<graph::TensorId> gate_up;
  std::vector<graph::KernelSpec> ks;
};

GemmRoute gemm_route(LinearQBuild& b, const LinearQExpertsDesc& d, const LinearQPart& wp, graph::TensorId ids,
                     graph::TensorId y, uint32_t max_rows, uint32_t max_pairs, uint32_t e) {
  using graph::Binding;
  graph::Graph& g = b.g;
  GemmRoute r;
  const uint32_t gs = activation_group(d.format, d.gs);
  graph::TensorId xin = d.x;
  if (d.norm) {
    r.normed = graph::add_tensor(g, d.name + ".normed", graph::DType::F32, {max_rows, b.k});
    xin = *r.normed;
    r.ks.push_back({gpu::make_key("rms_norm", "rms_norm"),
                    {Binding::of(0, d.x), Binding::of(1, *d.norm), Binding::of(2, xin), Binding::params(3)}});
  }
  r.xq = graph::add_tensor(g, d.name + ".xq", graph::DType::U32, {max_rows, b.k / 4});
  r.xs = graph::add_tensor(g, d.name + ".xs", graph::DType::F32, {max_rows, b.k / gs});
  r.ks.push_back({kernel_key(b, wp, "quantize_act"),
                  {Binding::of(0, xin), Binding::params(5), Binding::of(6, r.xq), Binding::of(7, r.xs)}});
  r.order = graph::add_tensor(g, d.name + ".order", graph::DType::U32, {max_pairs});
  r.tiles = graph::add_tensor(g, d.name + ".tiles", graph::DType::U32, {gemm_tile_entries(max_pairs, e), 4});
  r.ks.push_back({gpu::make_key("moe", "moe_sort"),
                  {Binding::of(1, ids), Binding::params(3), Binding::of(8, r.order), Binding::of(9, r.tiles)}});
  graph::TensorId ymat = y;
  if (d.swiglu) {
    r.gate_up = graph::add_tensor(g, d.name + ".gate_up", graph::DType::F32, {max_pairs, d.n_expert});
    ymat = *r.gate_up;
  }
  r.ks.push_back({kernel_key(b, wp, "gemm_experts"),
                  {Binding::of(8, wp.q), Binding::of(2, wp.scales), Binding::of(3, d.x), Binding::of(4, ymat),
                   Binding::params(5), Binding::of(6, r.xq), Binding::of(7, r.xs), Binding::of(9, d.x),
                   Binding::of(21, r.order), Binding::of(22, r.tiles)}});
  if (d.swiglu)
    r.ks.push_back({gpu::make_key("silu_mul", "silu_mul", gate_act_constants(d.act)),
                    {Binding::of(0, ymat), Binding::of(1, ymat), Binding::of(2, y), Binding::params(3)}});
  return r;
}

// Params and grids of the route the live rows take (the kernels in the order the routes list
// them).
void plan_experts(const ExpertsPlan& c, const graph::PlanArgs& a, graph::Plan& p) {
  const uint32_t maxg = a.caps->limits.maxComputeWorkgroupsPerDimension;
  const uint32_t rows = a.in[0][0];  // x's live rows (the tokens, routed)
  const uint32_t key = c.slots ? rows : a.in[3][0];
  const uint32_t pairs = c.slots ? rows * c.slots : key;
  size_t i = 0;
  if (c.slots && key > c.routed_hi) {  // moe_route first
    p.params[i].set(MoeParams{.m = rows, .e = c.e, .k = c.slots, .n = 0, .norm = c.route_norm ? 1u : 0u});
    p.grids[i++] = grid_1d(rows, maxg);
  }
  const LinearQParams lp{.m = pairs, .n = c.n, .k = c.k, .gs = c.gs, .has_bias = 0, .x_row = 0, .eps = c.eps,
                         .y_off = 0, .ld = c.n_expert, .pos_sym = 0, .n_ctx = 0, .kslice = c.k, .ex_n = c.n_expert,
                         .ex_xdiv = c.x_div, .ex_e = c.e, .ex_norm = c.route_norm ? 1u : 0u};
  if (key < c.gemm_lo) {  // the gemv: a workgroup per (tile of an expert's rows, pair)
    p.params[i].set(lp);
    p.grids[i] = grid_1d(ceil_div(c.n_expert, kLinearQGemvRows) * pairs, maxg);  // 16 rows (swiglu: 8 outputs)
    return;
  }
  if (c.norm) {
    p.params[i].set(RmsNormParams{rows, c.k, c.eps, 0});
    p.grids[i++] = grid_1d(rows, maxg);
  }
  LinearQParams quantize = lp;
  quantize.m = rows;
  p.params[i].set(quantize);
  p.grids[i++] = grid_1d(ceil_div(uint64_t(rows) * (c.k / c.gs), 64), maxg);
  const uint32_t entries = gemm_tile_entries(pairs, c.experts);
  p.params[i].set(MoeParams{.m = pairs, .e = c.experts, .k = kLinearQGemmBM, .n = entries, .norm = 0});
  p.grids[i++] = {1, 1, 1};
  p.params[i].set(lp);
  p.grids[i++] = {uint32_t(ceil_div(c.n_expert, kLinearQGemmBN)), entries, 1};
  if (c.swiglu) {
    p.params[i].set(SiluMulParams{pairs, c.n_expert / 2, kSiluBlocked, 0});
    p.grids[i] = grid_1d(ceil_div(uint64_t(pairs) * (c.n_expert / 2), kSiluMulWorkgroup), maxg);
  }
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
  // The routes key on the tokens (routed) or the pairs.
  graph::RouteSet routes{graph::RouteKey::of_dim(route ? d.x : ids, 0), {}};
  const uint32_t max_rows = route ? x.max_shape[0] : max_pairs;
  const uint32_t slots = route ? route->n_used : 0;
  const uint32_t experts = n / d.n_expert;
  graph::KernelSpec moe_route{gpu::make_key("moe", "moe_route"),
                              route ? std::vector<Binding>{Binding::of(0, route->logits), Binding::of(1, out.ids),
                                                           Binding::of(2, out.weights), Binding::params(3)}
                                    : std::vector<Binding>{}};
  // Few tokens: each workgroup routes its token itself (no dispatch of its own). More: moe_route
  // first, as every workgroup's ranking would cost more than the dispatch.
  const uint32_t routed_hi = route && routed_fits(b) ? std::min(kExpertsRoutedMaxTokens, max_rows) : 0;
  // From gemm_lo on (tokens or pairs), the grouped gemm.
  const bool gemm_fits = experts <= kMoeMaxExperts && experts_gemm_runs(b.caps) &&
                         gemm_tile_entries(max_pairs, experts) <= b.caps.limits.maxComputeWorkgroupsPerDimension;
  const uint32_t gemm_pairs = gemm_fits ? experts_gemm_from(d.gemm_from) : 0;
  const uint32_t gemm_lo =
      gemm_pairs == 0 ? max_rows + 1 : std::max(routed_hi + 1, uint32_t(ceil_div(gemm_pairs, route ? slots : 1)));
  if (routed_hi)
    routes.routes.push_back(
        {kLinearQExpertsRouted, "experts_routed", 1, routed_hi,
         {{gemv_key(b, wp, "gemv_experts_swiglu_route", d.norm.has_value()),
           with({Binding::of(17, route->logits), Binding::of(18, out.ids), Binding::of(19, out.weights)})}}});
  if (routed_hi + 1 < gemm_lo && routed_hi < max_rows) {
    std::vector<graph::KernelSpec> ks;
    if (route) ks.push_back(moe_route);
    ks.push_back(std::move(kernel));
    routes.routes.push_back({kLinearQExperts, "experts", routed_hi + 1, std::min(gemm_lo - 1, max_rows), std::move(ks)});
  }
  std::vector<graph::TensorId> outputs = {out.y};
  if (route) outputs.insert(outputs.end(), {out.ids, out.weights});
  std::vector<ScratchOut> scratch;
  if (gemm_lo <= max_rows) {
    GemmRoute gr = gemm_route(b, d, wp, ids, out.y, x.max_shape[0], max_pairs, experts);
    if (route) gr.ks.insert(gr.ks.begin(), moe_route);
    routes.routes.push_back({kLinearQExpertsGemm, "experts_gemm", gemm_lo, max_rows, std::move(gr.ks)});
    const uint32_t gs = activation_group(d.format, d.gs);
    if (gr.normed) scratch.push_back({*gr.normed, ScratchOut::XRows, k});
    scratch.push_back({gr.xq, ScratchOut::XRows, k / 4});
    scratch.push_back({gr.xs, ScratchOut::XRows, k / gs});
    scratch.push_back({gr.order, ScratchOut::Pairs, 0});
    scratch.push_back({gr.tiles, ScratchOut::Tiles, 4});
    if (gr.gate_up) scratch.push_back({*gr.gate_up, ScratchOut::Pairs, d.n_expert});
  }
  for (const ScratchOut& s : scratch) outputs.push_back(s.t);

  const uint64_t expert_bytes = quant_bytes(d.format, d.n_expert, k, d.gs);
  std::vector<graph::TensorId> inputs = {d.x, d.q, d.scales};
  inputs.push_back(route ? route->logits : d.ids);
  if (d.norm) inputs.push_back(*d.norm);
  const ExpertsPlan plan{.n = n, .k = k, .gs = activation_group(d.format, d.gs), .e = route ? e : experts,
                         .experts = experts, .slots = slots, .route_norm = route && route->norm,
                         .routed_hi = routed_hi, .gemm_lo = gemm_lo, .n_expert = d.n_expert, .x_div = d.x_div,
                         .swiglu = d.swiglu, .norm = d.norm.has_value(), .eps = d.eps};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = std::string("linear_") + quant_format_name(d.format) + "_experts",
      .inputs = inputs,
      .outputs = outputs,
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [name = d.name, n_out, x_div = d.x_div, slots, scratch, experts](const graph::InferArgs& a) {
            const uint32_t pairs = slots ? a.in[0][0] * slots : a.in[3][0];
            if (uint64_t(a.in[0][0]) * x_div < pairs)
              throw std::invalid_argument(fmt::format("{}: {} pairs past {} live rows of x at {} a row", name, pairs,
                                                      a.in[0][0], x_div));
            a.out[0] = graph::Shape{pairs, n_out};
            if (slots) a.out[1] = a.out[2] = graph::Shape{pairs};
            const size_t first = slots ? 3 : 1;
            for (size_t i = 0; i < scratch.size(); ++i) {
              const ScratchOut& s = scratch[i];
              a.out[first + i] = s.kind == ScratchOut::XRows ? graph::Shape{a.in[0][0], s.cols}
                                 : s.kind == ScratchOut::Tiles ? graph::Shape{gemm_tile_entries(pairs, experts), 4}
                                 : s.cols                      ? graph::Shape{pairs, s.cols}
                                                               : graph::Shape{pairs};
            }
          },
      .plan = [plan](const graph::PlanArgs& a, graph::Plan& p) { plan_experts(plan, a, p); },
      .cost =
          [k, n_out, expert_bytes, slots, gemm_lo, experts](const graph::PlanArgs& a) {
            // Each pair reads its expert's rows (pairs sharing one read it from L2 after the
            // first); the grouped gemm reads each chosen expert's once a tile.
            const uint64_t key = slots ? a.in[0][0] : a.in[3][0];
            const uint64_t pairs = slots ? key * slots : key;
            const uint64_t reads = key >= gemm_lo ? std::min<uint64_t>(pairs, experts) : pairs;
            return graph::NodeCost{reads * expert_bytes + pairs * (k * 4 + n_out * 4), 2.0 * double(pairs) * n_out * k};
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
