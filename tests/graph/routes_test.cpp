// GraphRoutes: declared route ranges must be non-empty, disjoint and cover the key's domain.
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "ops/elementwise/elementwise.h"
#include "support/device.h"

namespace wgrt::graph {
namespace {

KernelSpec dummy_kernel() { return KernelSpec{gpu::make_key("elementwise", "add"), {}}; }

RouteSet routes_of(std::initializer_list<std::pair<int64_t, int64_t>> ranges) {
  RouteSet set;
  set.key = RouteKey::of_dim(TensorId{0}, 0);
  uint32_t i = 0;
  for (auto [lo, hi] : ranges) {
    set.routes.push_back({RouteId{i + 1}, "r" + std::to_string(i), lo, hi, {dummy_kernel()}});
    ++i;
  }
  return set;
}

std::string error_of(const RouteSet& set, int64_t lo, int64_t hi) {
  try {
    validate_routes(set, lo, hi, "n_tokens");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(GraphRoutes, FullCoverageAccepted) {
  EXPECT_EQ(error_of(routes_of({{1, 1}, {2, 7}, {8, 512}}), 1, 512), "");
  EXPECT_EQ(error_of(routes_of({{8, 512}, {1, 1}, {2, 7}}), 1, 512), "");  // any order
  EXPECT_EQ(error_of(routes_of({{0, 4095}}), 0, 4095), "");
  EXPECT_EQ(select_route(routes_of({{1, 1}, {2, 7}, {8, 512}}), 7).name, "r1");
  EXPECT_EQ(select_route(routes_of({{1, 1}, {2, 7}, {8, 512}}), 8).name, "r2");
}

TEST(GraphRoutes, GapRejected) {
  std::string e = error_of(routes_of({{1, 1}, {3, 512}}), 1, 512);
  EXPECT_NE(e.find("n_tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("gap [2, 2]"), std::string::npos) << e;
  e = error_of(routes_of({{1, 1}, {2, 500}}), 1, 512);
  EXPECT_NE(e.find("gap [501, 512]"), std::string::npos) << e;
  e = error_of(routes_of({{2, 512}}), 1, 512);
  EXPECT_NE(e.find("gap [1, 1]"), std::string::npos) << e;
}

TEST(GraphRoutes, OverlapRejected) {
  std::string e = error_of(routes_of({{1, 4}, {3, 7}, {8, 512}}), 1, 512);
  EXPECT_NE(e.find("n_tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("overlap on [3, 4]"), std::string::npos) << e;
  EXPECT_NE(e.find("[1, 4]"), std::string::npos) << e;
}

TEST(GraphRoutes, EmptyRangeRejected) {
  std::string e = error_of(routes_of({{1, 1}, {9, 8}, {2, 512}}), 1, 512);
  EXPECT_NE(e.find("empty range [9, 8]"), std::string::npos) << e;
  EXPECT_NE(e.find("n_tokens"), std::string::npos) << e;
}

TEST(GraphRoutes, PastDomainRejected) {
  std::string e = error_of(routes_of({{1, 1}, {2, 600}}), 1, 512);
  EXPECT_NE(e.find("past the domain"), std::string::npos) << e;
}

// The same checks run at build, naming the node and the key.
TEST(GraphRoutes, BuildRejectsGapNamingNodeAndKey) {
  Graph g(test::device());
  TensorId a = add_input(g, {.name = "a", .max_shape = {16, 8}, .dynamic_dims = 1});
  TensorId b = add_weight(g, {.name = "b", .shape = {8}});
  TensorId out = add_tensor(g, "out", DType::F32, {16, 8});
  KernelSpec k{gpu::make_key("elementwise", "add"),
               {Binding::of(0, a), Binding::of(1, b), Binding::of(2, out), Binding::params(3)}};
  RouteSet routes{RouteKey::of_dim(a, 0), {{RouteId{1}, "small", 1, 4, {k}}, {RouteId{2}, "big", 6, 16, {k}}}};
  add_node(g, Node{.name = "gappy", .op = "add", .inputs = {a, b}, .outputs = {out},
                   .routes = routes,
                   .infer = [](const InferArgs& x) { x.out[0] = x.in[0]; },
                   .plan = [](const PlanArgs&, Plan&) {}});
  try {
    build(g);
    FAIL() << "build accepted a gap";
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("gappy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dim 0 of 'a'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gap [5, 5]"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace wgrt::graph
