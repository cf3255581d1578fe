// GraphDynamicCapability: a node that cannot handle varying shapes is refused at build when
// one of its inputs may vary.
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "support/device.h"

namespace wgrt::graph {
namespace {

// A node like elementwise add, declared without dynamic support.
NodeId add_static_node(Graph& g, const char* name, TensorId a, TensorId b, TensorId out,
                       std::vector<SymbolId> shape_symbols = {}) {
  KernelSpec k{gpu::make_key("elementwise", "add"),
               {Binding::of(0, a), Binding::of(1, b), Binding::of(2, out), Binding::params(3)}};
  return add_node(g, Node{.name = name,
                          .op = "static_add",
                          .inputs = {a, b},
                          .outputs = {out},
                          .shape_symbols = std::move(shape_symbols),
                          .dynamic = false,
                          .routes = single_route(RouteKey::of_dim(a, 0), 1, tensor_info(g, a).max_shape[0], {k}),
                          .infer = [](const InferArgs& x) { x.out[0] = x.in[0]; },
                          .plan = [](const PlanArgs&, Plan& p) { p.grids[0] = {1, 1, 1}; }});
}

std::string build_error(Graph& g) {
  try {
    build(g);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(GraphDynamicCapability, StaticNodeOnVaryingInputFailsBuild) {
  Graph g(test::device());
  TensorId a = add_input(g, {.name = "tokens_in", .max_shape = {8, 4}, .dynamic_dims = 1});
  TensorId b = add_weight(g, {.name = "b", .shape = {4}});
  TensorId out = add_tensor(g, "out", DType::F32, {8, 4});
  add_static_node(g, "fixed_only", a, b, out);
  std::string e = build_error(g);
  EXPECT_NE(e.find("fixed_only"), std::string::npos) << e;
  EXPECT_NE(e.find("tokens_in"), std::string::npos) << e;
}

TEST(GraphDynamicCapability, VariationPropagatesThroughNodes) {
  Graph g(test::device());
  TensorId a = add_input(g, {.name = "a", .max_shape = {8, 4}, .dynamic_dims = 1});
  TensorId b = add_weight(g, {.name = "b", .shape = {4}});
  TensorId mid = add_tensor(g, "mid", DType::F32, {8, 4});
  TensorId out = add_tensor(g, "out", DType::F32, {8, 4});
  KernelSpec k{gpu::make_key("elementwise", "add"),
               {Binding::of(0, a), Binding::of(1, b), Binding::of(2, mid), Binding::params(3)}};
  add_node(g, Node{.name = "dynamic_first", .op = "add", .inputs = {a, b}, .outputs = {mid},
                   .routes = single_route(RouteKey::of_dim(a, 0), 1, 8, {k}),
                   .infer = [](const InferArgs& x) { x.out[0] = x.in[0]; },
                   .plan = [](const PlanArgs&, Plan&) {}});
  add_static_node(g, "static_second", mid, b, out);
  std::string e = build_error(g);
  EXPECT_NE(e.find("static_second"), std::string::npos) << e;
  EXPECT_NE(e.find("'mid'"), std::string::npos) << e;
}

TEST(GraphDynamicCapability, StaticNodeOnVaryingSymbolFailsBuild) {
  Graph g(test::device());
  TensorId a = add_input(g, {.name = "a", .max_shape = {8, 4}});
  TensorId b = add_weight(g, {.name = "b", .shape = {4}});
  TensorId out = add_tensor(g, "out", DType::F32, {8, 4});
  SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 127});
  add_static_node(g, "reads_pos", a, b, out, {pos});
  std::string e = build_error(g);
  EXPECT_NE(e.find("reads_pos"), std::string::npos) << e;
  EXPECT_NE(e.find("'pos'"), std::string::npos) << e;
}

TEST(GraphDynamicCapability, StaticNodeOnFixedInputsBuilds) {
  Graph g(test::device());
  TensorId a = add_input(g, {.name = "a", .max_shape = {8, 4}});
  TensorId b = add_weight(g, {.name = "b", .shape = {4}});
  TensorId out = add_tensor(g, "out", DType::F32, {8, 4});
  add_static_node(g, "fixed_ok", a, b, out);
  EXPECT_EQ(build_error(g), "");
  EXPECT_TRUE(is_built(g));
}

}  // namespace
}  // namespace wgrt::graph
