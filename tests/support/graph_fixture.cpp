#include "support/graph_fixture.h"

#include <stdexcept>

#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "reference/reference.h"
#include "support/random.h"

namespace wgrt::test {

using namespace graph;

SmallGraph add_small_graph(Graph& g, int64_t throw_at, const gpu::PipelineKey& probe_kernel) {
  SmallGraph s;
  s.throw_at = std::make_shared<int64_t>(throw_at);
  s.x = add_input(g, {.name = "x", .max_shape = {SmallGraph::kMaxRows, SmallGraph::kK},
                      .dynamic_dims = 0b01});
  s.w1 = add_weight(g, {.name = "w1", .shape = {SmallGraph::kH, SmallGraph::kK}});
  s.b1 = add_weight(g, {.name = "b1", .shape = {SmallGraph::kH}});
  s.r = add_weight(g, {.name = "r", .shape = {SmallGraph::kH}});
  s.w2 = add_weight(g, {.name = "w2", .shape = {SmallGraph::kOut, SmallGraph::kH}});
  s.step = add_symbol(g, {.name = "step", .lo = 0, .hi = 100});

  s.h = ops::add_linear(g, {.name = "h", .x = s.x, .w = s.w1, .bias = s.b1});
  s.n_lin1 = find_node(g, "h");

  s.h2 = add_tensor(g, "h2", DType::F32, {SmallGraph::kMaxRows, SmallGraph::kH});
  KernelSpec k{probe_kernel,
               {Binding::of(0, s.h), Binding::of(1, s.r), Binding::of(2, s.h2), Binding::params(3)}};
  SymbolId step = s.step;
  s.n_probe = add_node(g, Node{
      .name = "probe",
      .op = "probe",
      .inputs = {s.h, s.r},
      .outputs = {s.h2},
      .routes = single_route(RouteKey::of_symbol(step), 0, 100, {k}),
      .infer = [](const InferArgs& a) { a.out[0] = a.in[0]; },
      .plan =
          [step, throw_at = s.throw_at](const PlanArgs& a, Plan& p) {
            if (a.sym[step] == *throw_at) throw std::runtime_error("probe: planned failure");
            ops::ElementwiseParams params{};
            params.n = uint32_t(a.out[0].numel());
            params.b_n = uint32_t(a.in[1].numel());
            params._pad1 = uint32_t(a.sym[step]);  // unread by the kernel; makes bytes vary
            p.params[0].set(params);
            p.grids[0] = ops::grid_1d(ops::ceil_div(params.n, 256), 65535);
          },
  });

  s.y = ops::add_linear(g, {.name = "y", .x = s.h2, .w = s.w2});
  s.n_lin2 = find_node(g, "y");
  mark_output(g, s.y);
  mark_output(g, s.h);
  return s;
}

void build_small_graph(Graph& g, SmallGraph& s) {
  build(g);
  s.w1_data = random_floats(SmallGraph::kH * SmallGraph::kK, 1);
  s.b1_data = random_floats(SmallGraph::kH, 2);
  s.r_data = random_floats(SmallGraph::kH, 3);
  s.w2_data = random_floats(SmallGraph::kOut * SmallGraph::kH, 4);
  write_tensor<float>(g, s.w1, s.w1_data);
  write_tensor<float>(g, s.b1, s.b1_data);
  write_tensor<float>(g, s.r, s.r_data);
  write_tensor<float>(g, s.w2, s.w2_data);
}

std::vector<float> small_graph_reference(const SmallGraph& s, const std::vector<float>& x, uint32_t rows) {
  auto h = ref::linear(x, s.w1_data, s.b1_data, rows, SmallGraph::kH, SmallGraph::kK);
  auto h2 = ref::add(h, s.r_data);
  return ref::linear(h2, s.w2_data, {}, rows, SmallGraph::kOut, SmallGraph::kH);
}

}  // namespace wgrt::test
