// GraphRouteIds: routes are referred to by id, never by position. A route declared in front of
// the others changes neither which route is active nor what runs (checked against the CPU); a
// route without an id, two routes sharing one, and a plan naming an id its node does not
// declare are errors naming the node and the route.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "ops/common.h"
#include "ops/elementwise/elementwise.h"
#include "support/device.h"
#include "support/random.h"
#include "support/throws.h"

namespace wgrt::graph {
namespace {

using ::testing::HasSubstr;
using test::message_of;

constexpr uint32_t kRows = 16, kCols = 8;
constexpr RouteId kAdd{1}, kMulFirst{2}, kMulAll{3};

// out = a + b (route kAdd), a * b[0] (kMulFirst: the plan broadcasts b's first element) or
// a * b (kMulAll), on a's rows.
struct PickGraph {
  TensorId a, b, out;
  NodeId node;
};

Route route(RouteId id, const char* name, int64_t lo, int64_t hi, const char* entry, const PickGraph& p) {
  return Route{id, name, lo, hi,
               {{gpu::make_key("elementwise", entry),
                 {Binding::of(0, p.a), Binding::of(1, p.b), Binding::of(2, p.out), Binding::params(3)}}}};
}

// `routes` gets the graph's tensors to bind; `extra_id`, when set, is one more id the plan names.
template <class Routes>
PickGraph add_pick(Graph& g, const Routes& routes, RouteId extra_id = {}) {
  PickGraph p;
  p.a = add_input(g, {.name = "a", .max_shape = {kRows, kCols}, .dynamic_dims = 0b01});
  p.b = add_weight(g, {.name = "b", .shape = {kCols}});
  p.out = add_tensor(g, "out", DType::F32, {kRows, kCols});
  RouteSet set{RouteKey::of_dim(p.a, 0), routes(p)};
  p.node = add_node(g, Node{
      .name = "pick",
      .op = "pick",
      .inputs = {p.a, p.b},
      .outputs = {p.out},
      .routes = std::move(set),
      .infer = [](const InferArgs& x) { x.out[0] = x.in[0]; },
      .plan =
          [extra_id](const PlanArgs& x, Plan& plan) {
            if (extra_id != RouteId{}) (void)x.route_is(extra_id);
            ops::ElementwiseParams params{};
            params.n = uint32_t(x.out[0].numel());
            params.b_n = x.route_is(kMulFirst) ? 1 : kCols;
            plan.params[0].set(params);
            plan.grids[0] = ops::grid_1d(ops::ceil_div(params.n, 256), 65535);
          },
  });
  mark_output(g, p.out);
  return p;
}

std::vector<Route> two_routes(const PickGraph& p) {
  return {route(kAdd, "add", 1, 4, "add", p), route(kMulFirst, "mul_first", 5, kRows, "mul", p)};
}
// A third route declared in front of the two, taking the top of mul_first's range.
std::vector<Route> three_routes(const PickGraph& p) {
  return {route(kMulAll, "mul_all", 13, kRows, "mul", p), route(kAdd, "add", 1, 4, "add", p),
          route(kMulFirst, "mul_first", 5, 12, "mul", p)};
}

std::vector<float> reference(RouteId r, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    out[i] = r == kAdd ? a[i] + b[i % kCols] : r == kMulFirst ? a[i] * b[0] : a[i] * b[i % kCols];
  return out;
}

struct Step {
  RouteId route;
  std::vector<float> out;
};
Step run_step(Graph& g, const PickGraph& p, uint32_t rows, const std::vector<float>& a) {
  ShapeInput shape{p.a, {rows, kCols}};
  update(g, {&shape, 1});
  write_tensor<float>(g, p.a, std::span<const float>(a.data(), size_t(rows) * kCols));
  execute(g);
  return {active_route(g, p.node), read_output<float>(g, p.out)};
}

TEST(GraphRouteIds, ARouteDeclaredInFrontChangesNothingTheOthersRun) {
  Graph before(test::device()), after(test::device());
  const PickGraph pb = add_pick(before, two_routes);
  const PickGraph pa = add_pick(after, three_routes);
  build(before);
  build(after);
  const auto b = test::random_floats(kCols, 2, 0.5f, 2.f);
  write_tensor<float>(before, pb.b, b);
  write_tensor<float>(after, pa.b, b);
  const auto a = test::random_floats(size_t(kRows) * kCols, 1);
  for (uint32_t rows : {3u, 7u, 1u, 12u, 4u, 5u}) {
    SCOPED_TRACE(testing::Message() << rows << " rows");
    const std::vector<float> live(a.begin(), a.begin() + size_t(rows) * kCols);
    const Step x = run_step(before, pb, rows, a), y = run_step(after, pa, rows, a);
    const RouteId want = rows <= 4 ? kAdd : kMulFirst;
    EXPECT_EQ(x.route, want);
    EXPECT_EQ(y.route, want);
    EXPECT_LT(test::max_rel_error(x.out, reference(want, live, b)), 1e-6f);
    EXPECT_EQ(y.out, x.out);
  }
  // The new route runs where it was declared, with its own plan.
  const Step y = run_step(after, pa, 14, a);
  EXPECT_EQ(y.route, kMulAll);
  EXPECT_EQ(route_info(after, pa.node, y.route).name, "mul_all");
  EXPECT_LT(test::max_rel_error(y.out, reference(kMulAll, {a.begin(), a.begin() + 14 * kCols}, b)), 1e-6f);
}

TEST(GraphRouteIds, TwoRoutesSharingAnIdFailTheBuildNamingThem) {
  Graph g(test::device());
  add_pick(g, [](const PickGraph& p) {
    return std::vector<Route>{route(kAdd, "add", 1, 4, "add", p), route(kAdd, "mul_first", 5, kRows, "mul", p)};
  });
  const std::string msg = message_of<std::invalid_argument>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("node 'pick'"));
  EXPECT_THAT(msg, HasSubstr("routes 'add' and 'mul_first' share the id 1"));
  EXPECT_FALSE(is_built(g));
}

TEST(GraphRouteIds, ARouteWithoutAnIdFailsTheBuildNamingIt) {
  Graph g(test::device());
  add_pick(g, [](const PickGraph& p) {
    return std::vector<Route>{route(kAdd, "add", 1, 4, "add", p), route(RouteId{}, "mul_first", 5, kRows, "mul", p)};
  });
  const std::string msg = message_of<std::invalid_argument>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("node 'pick'"));
  EXPECT_THAT(msg, HasSubstr("route 'mul_first' has no id"));
}

TEST(GraphRouteIds, APlanNamingAnUndeclaredIdFailsNamingNodeAndId) {
  Graph g(test::device());
  add_pick(g, two_routes, kMulAll);  // the plan names mul_all, which this node lacks
  const std::string msg = message_of<std::logic_error>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("node 'pick'"));
  EXPECT_THAT(msg, HasSubstr("route id 3"));
  EXPECT_THAT(msg, HasSubstr("add = 1, mul_first = 2"));
  EXPECT_FALSE(is_built(g));
}

TEST(GraphRouteIds, LookingUpAnUnknownIdFailsNamingNodeAndId) {
  Graph g(test::device());
  const PickGraph p = add_pick(g, two_routes);
  build(g);
  EXPECT_EQ(route_info(g, p.node, kMulFirst).name, "mul_first");
  const std::string msg = message_of<std::invalid_argument>([&] { (void)route_info(g, p.node, kMulAll); });
  EXPECT_THAT(msg, HasSubstr("node 'pick'"));
  EXPECT_THAT(msg, HasSubstr("no route of id 3"));
}

}  // namespace
}  // namespace wgrt::graph
