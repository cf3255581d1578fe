#include "ops/silu_mul/silu_mul.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(SiluMulParams, n_tokens)},
                                  {"ff", offsetof(SiluMulParams, ff)},
                                  {"fused", offsetof(SiluMulParams, fused)},
                                  {"_pad0", offsetof(SiluMulParams, _pad0)}};
}  // namespace

const ParamLayout kSiluMulLayout{"silu_mul", sizeof(SiluMulParams), kFields};

graph::Shape infer_silu_mul(const SiluMulInferCtx& c) {
  if (c.gate.rank != 2)
    throw std::invalid_argument(fmt::format("silu_mul: gate {} is not [n_tokens, ff]", graph::to_string(c.gate)));
  if (c.up) {
    if (*c.up != c.gate)
      throw std::invalid_argument(fmt::format("silu_mul: gate {} and up {} differ",
                                              graph::to_string(c.gate), graph::to_string(*c.up)));
    return c.gate;
  }
  if (c.gate[1] % 2 != 0)
    throw std::invalid_argument(fmt::format("silu_mul: fused gate|up {} has an odd row",
                                            graph::to_string(c.gate)));
  return graph::Shape{c.gate[0], c.gate[1] / 2};
}

void plan_silu_mul(const SiluMulPlanCtx& c, graph::Plan& plan) {
  SiluMulParams p{};
  p.n_tokens = c.out[0];
  p.ff = c.out[1];
  p.fused = c.fused;
  plan.params[0].set(p);
  plan.grids[0] = grid_1d(ceil_div(c.out.numel(), kSiluMulWorkgroup), c.max_groups_per_dim);
}

std::vector<gpu::OverrideConstant> gate_act_constants(GateAct act) {
  if (act == GateAct::GeluTanh) return {{"GELU", 1.0}};
  return {};
}

graph::TensorId add_silu_mul(graph::Graph& g, const SiluMulDesc& d) {
  const graph::Tensor& gate = graph::tensor_info(g, d.gate);
  if (gate.dtype != graph::DType::F32 || (d.up && graph::tensor_info(g, *d.up).dtype != graph::DType::F32))
    throw std::invalid_argument(fmt::format("{}: silu_mul takes f32 tensors", d.name));
  std::optional<graph::Shape> up_shape;
  if (d.up) up_shape = graph::tensor_info(g, *d.up).max_shape;
  graph::Shape out_shape = infer_silu_mul({gate.max_shape, up_shape});
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, out_shape);
  bool fused = !d.up;
  graph::TensorId up = d.up.value_or(d.gate);  // fused: the same buffer, read at an offset

  graph::KernelSpec k{gpu::make_key("silu_mul", "silu_mul", gate_act_constants(d.act)),
                      {graph::Binding::of(0, d.gate), graph::Binding::of(1, up),
                       graph::Binding::of(2, out), graph::Binding::params(3)}};
  std::vector<graph::TensorId> inputs = {d.gate};
  if (d.up) inputs.push_back(*d.up);
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "silu_mul",
      .inputs = inputs,
      .outputs = {out},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.gate, 0), 1, gate.max_shape[0], {k}),
      .infer =
          [fused](const graph::InferArgs& a) {
            a.out[0] = infer_silu_mul({a.in[0], fused ? std::nullopt : std::optional(a.in[1])});
          },
      .plan =
          [fused](const graph::PlanArgs& a, graph::Plan& p) {
            plan_silu_mul({a.out[0], fused ? 1u : 0u, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
  });
  return out;
}

}  // namespace wgrt::ops
