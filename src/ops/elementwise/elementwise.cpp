#include "ops/elementwise/elementwise.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n", offsetof(ElementwiseParams, n)},
                                  {"b_n", offsetof(ElementwiseParams, b_n)},
                                  {"value", offsetof(ElementwiseParams, value)},
                                  {"_pad1", offsetof(ElementwiseParams, _pad1)}};
constexpr uint32_t kWorkgroup = 256;
}  // namespace

const ParamLayout kElementwiseLayout{"elementwise", sizeof(ElementwiseParams), kFields};

graph::Shape infer_binary(const BinaryInferCtx& c) {
  uint64_t an = c.a.numel(), bn = c.b.numel();
  if (bn == 0 || an % bn != 0)
    throw std::invalid_argument(fmt::format("binary op: b {} does not broadcast over a {}",
                                            graph::to_string(c.b), graph::to_string(c.a)));
  return c.a;
}

void plan_binary(const BinaryPlanCtx& c, graph::Plan& plan) {
  ElementwiseParams p{};
  p.n = uint32_t(c.out.numel());
  p.b_n = uint32_t(c.b.numel());
  plan.params[0].set(p);
  plan.grids[0] = grid_1d(ceil_div(p.n, kWorkgroup), c.max_groups_per_dim);
}

graph::TensorId add_binary(graph::Graph& g, const BinaryDesc& d) {
  const graph::Tensor& a = graph::tensor_info(g, d.a);
  const graph::Tensor& b = graph::tensor_info(g, d.b);
  if (a.dtype != graph::DType::F32 || b.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: binary ops take f32 tensors", d.name));
  infer_binary({a.max_shape, b.max_shape});  // rejects non-broadcastable shapes at build
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, a.max_shape);
  const char* entry = d.op == Binary::Add ? "add" : "mul";
  require_fits(graph::device_caps(g).limits, d.name + ": " + entry, {0, kWorkgroup});  // no workgroup data

  graph::KernelSpec k{gpu::make_key("elementwise", entry),
                      {graph::Binding::of(0, d.a), graph::Binding::of(1, d.b),
                       graph::Binding::of(2, out), graph::Binding::params(3)}};
  graph::Node node{
      .name = d.name,
      .op = entry,
      .inputs = {d.a, d.b},
      .outputs = {out},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.a, 0), 1, a.max_shape[0], {k}),
      .infer = [](const graph::InferArgs& x) { x.out[0] = infer_binary({x.in[0], x.in[1]}); },
      .plan =
          [](const graph::PlanArgs& x, graph::Plan& p) {
            plan_binary({x.out[0], x.in[1], x.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
  };
  graph::add_node(g, std::move(node));
  return out;
}

graph::TensorId add_unary(graph::Graph& g, const UnaryDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  if (x.dtype != graph::DType::F32) throw std::invalid_argument(fmt::format("{}: unary ops take an f32 tensor", d.name));
  if (!std::isfinite(d.value) || (d.op == Unary::Softcap && !(d.value > 0)))
    throw std::invalid_argument(fmt::format("{}: the constant {} is not finite{}", d.name, d.value,
                                            d.op == Unary::Softcap ? " and positive (a cap)" : ""));
  const graph::Shape shape = x.max_shape;
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, shape);
  const char* entry = d.op == Unary::Scale ? "scale" : "softcap";
  require_fits(graph::device_caps(g).limits, d.name + ": " + entry, {0, kWorkgroup});
  // b (binding 1) is not bound: the unary entry points never read it, so their layout lacks it.
  graph::KernelSpec k{gpu::make_key("elementwise", entry),
                      {graph::Binding::of(0, d.x), graph::Binding::of(2, out), graph::Binding::params(3)}};
  const float value = d.value;
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = entry,
      .inputs = {d.x},
      .outputs = {out},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, shape[0], {k}),
      .infer = [](const graph::InferArgs& a) { a.out[0] = a.in[0]; },
      .plan =
          [value](const graph::PlanArgs& a, graph::Plan& p) {
            ElementwiseParams ep{};
            ep.n = uint32_t(a.out[0].numel());
            ep.b_n = 1;
            ep.value = value;
            p.params[0].set(ep);
            p.grids[0] = grid_1d(ceil_div(ep.n, kWorkgroup), a.caps->limits.maxComputeWorkgroupsPerDimension);
          },
  });
  return out;
}

}  // namespace wgrt::ops
