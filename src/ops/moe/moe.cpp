#include "ops/moe/moe.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"m", offsetof(MoeParams, m)},         {"e", offsetof(MoeParams, e)},
                                  {"k", offsetof(MoeParams, k)},         {"n", offsetof(MoeParams, n)},
                                  {"norm", offsetof(MoeParams, norm)},   {"_pad0", offsetof(MoeParams, _pad0)},
                                  {"_pad1", offsetof(MoeParams, _pad1)}, {"_pad2", offsetof(MoeParams, _pad2)}};

const graph::Tensor& f32_rank(const graph::Graph& g, graph::TensorId t, uint32_t rank, const char* what,
                              const std::string& name) {
  const graph::Tensor& x = graph::tensor_info(g, t);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != rank)
    throw std::invalid_argument(fmt::format("{}: {} must be f32 of rank {}, not {} {}", name, what, rank,
                                            graph::dtype_name(x.dtype), graph::to_string(x.max_shape)));
  return x;
}
}  // namespace

const ParamLayout kMoeLayout{"moe", sizeof(MoeParams), kFields};

void check_moe_route(const std::string& name, uint32_t e, uint32_t n_used) {
  if (e > kMoeMaxExperts || n_used == 0 || n_used > std::min(e, kMoeMaxUsed))
    throw std::invalid_argument(fmt::format("{}: {} of {} experts per token (hint: 1 to {} used of at most {})", name,
                                            n_used, e, std::min(e, kMoeMaxUsed), kMoeMaxExperts));
}

MoeRoute add_moe_route(graph::Graph& g, const MoeRouteDesc& d) {
  const graph::Tensor& l = f32_rank(g, d.logits, 2, "the router's logits", d.name);
  const uint32_t max_m = l.max_shape[0], e = l.max_shape[1];
  check_moe_route(d.name, e, d.n_used);
  MoeRoute r;
  r.ids = graph::add_tensor(g, d.name + ".ids", graph::DType::U32, {max_m * d.n_used});
  r.weights = graph::add_tensor(g, d.name + ".weights", graph::DType::F32, {max_m * d.n_used});
  graph::KernelSpec k{gpu::make_key("moe", "moe_route"),
                      {graph::Binding::of(0, d.logits), graph::Binding::of(1, r.ids),
                       graph::Binding::of(2, r.weights), graph::Binding::params(3)}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "moe_route",
      .inputs = {d.logits},
      .outputs = {r.ids, r.weights},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.logits, 0), 1, max_m, {k}),
      .infer =
          [k_used = d.n_used](const graph::InferArgs& a) {
            a.out[0] = a.out[1] = graph::Shape{a.in[0][0] * k_used};
          },
      .plan =
          [e, k_used = d.n_used, norm = d.norm](const graph::PlanArgs& a, graph::Plan& p) {
            const uint32_t m = a.in[0][0];
            p.params[0].set(MoeParams{.m = m, .e = e, .k = k_used, .n = 0, .norm = norm ? 1u : 0u});
            p.grids[0] = grid_1d(m, a.caps->limits.maxComputeWorkgroupsPerDimension);
          },
  });
  return r;
}

graph::TensorId add_moe_combine(graph::Graph& g, const MoeCombineDesc& d) {
  const graph::Tensor& dn = f32_rank(g, d.experts, 2, "the experts' outputs", d.name);
  const graph::Tensor& w = f32_rank(g, d.weights, 1, "the weights", d.name);
  const graph::Tensor& res = f32_rank(g, d.residual, 2, "the residual", d.name);
  const uint32_t max_m = res.max_shape[0], n = res.max_shape[1];
  if (d.n_used == 0 || dn.max_shape != graph::Shape{max_m * d.n_used, n} || w.max_shape != graph::Shape{max_m * d.n_used})
    throw std::invalid_argument(fmt::format("{}: the experts' outputs {} and weights {} must be [{}, {}] and [{}] "
                                            "for a residual {} at {} experts a token", d.name,
                                            graph::to_string(dn.max_shape), graph::to_string(w.max_shape),
                                            max_m * d.n_used, n, max_m * d.n_used, graph::to_string(res.max_shape),
                                            d.n_used));
  const graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, {max_m, n});
  graph::KernelSpec k{gpu::make_key("moe", "moe_combine"),
                      {graph::Binding::params(3), graph::Binding::of(4, d.experts), graph::Binding::of(5, d.weights),
                       graph::Binding::of(6, d.residual), graph::Binding::of(7, out)}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "moe_combine",
      .inputs = {d.experts, d.weights, d.residual},
      .outputs = {out},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.residual, 0), 1, max_m, {k}),
      .infer =
          [name = d.name, k_used = d.n_used](const graph::InferArgs& a) {
            if (a.in[0][0] != a.in[2][0] * k_used || a.in[1][0] != a.in[0][0])
              throw std::invalid_argument(fmt::format("{}: {} expert rows and {} weights for {} tokens at {} a token",
                                                      name, a.in[0][0], a.in[1][0], a.in[2][0], k_used));
            a.out[0] = a.in[2];
          },
      .plan =
          [k_used = d.n_used, n](const graph::PlanArgs& a, graph::Plan& p) {
            const uint32_t m = a.in[2][0];
            p.params[0].set(MoeParams{.m = m, .e = 0, .k = k_used, .n = n, .norm = 0});
            p.grids[0] = grid_1d(ceil_div(uint64_t(m) * n, kMoeWorkgroup), a.caps->limits.maxComputeWorkgroupsPerDimension);
          },
  });
  return out;
}

}  // namespace wgrt::ops
