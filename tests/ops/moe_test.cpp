// moe_route and moe_combine (ops/moe/moe.h) against the CPU reference (ref::moe_route,
// ref::moe_combine), the live token count changing step to step on one graph. The ids must be
// exactly the reference's (ties, planted, go to the lower expert); weights and sums within a few
// f32 roundings.
#include <fmt/format.h>

#include <cmath>

#include "ops/moe/moe.h"
#include "reference/moe_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

struct RouteCase {
  uint32_t e, k;
  bool norm;
};

void run_route(const RouteCase& c) {
  const std::vector<uint32_t> steps = {1, 7, 3, 1};
  Graph g(device());
  TensorId l = add_input(g, {.name = "l", .max_shape = {7, c.e}, .dynamic_dims = 1});
  ops::MoeRoute r = ops::add_moe_route(g, {.name = "route", .logits = l, .n_used = c.k, .norm = c.norm});
  mark_output(g, r.ids);
  mark_output(g, r.weights);
  build(g);
  uint32_t step = 0;
  for (uint32_t m : steps) {
    SCOPED_TRACE(fmt::format("step {}: {} tokens", step, m));
    auto lv = random_floats(size_t(m) * c.e, 50 + step++, -4.f, 4.f);
    for (uint32_t t = 0; t < m; ++t)  // a tie among the largest: the lower expert comes first
      lv[size_t(t) * c.e + (t + 3) % c.e] = lv[size_t(t) * c.e + (t * 5 + 1) % c.e] = 9.5f;
    std::vector<ShapeInput> shapes = {{l, {m, c.e}}};
    std::vector<StepInput> in = {{l, lv.data(), lv.size() * 4}};
    const std::vector<float> w = run_step(g, shapes, {}, in, r.weights);
    const std::vector<uint32_t> ids = read_output<uint32_t>(g, r.ids);
    const ref::MoeChoice want = ref::moe_route(lv, m, c.e, c.k, c.norm);
    ASSERT_EQ(live_shape(g, r.ids), (Shape{m * c.k}));
    EXPECT_EQ(ids, want.ids);
    std::vector<float> bound(want.weights.size());
    for (size_t i = 0; i < bound.size(); ++i) bound[i] = 1e-6f + 4e-6f * c.e * want.weights[i];
    EXPECT_TRUE(within(w, want.weights, bound));
  }
}

void PrintTo(const RouteCase& c, std::ostream* os) { *os << c.k << " of " << c.e << (c.norm ? ", norm" : ""); }

class MoeRoute : public ::testing::TestWithParam<RouteCase> {};
TEST_P(MoeRoute, MatchesReference) { run_route(GetParam()); }
// Mixtral's 8 of 2, Qwen3-MoE's 128 of 8, past a workgroup (160), and the most (512 of 32).
INSTANTIATE_TEST_SUITE_P(, MoeRoute,
                         ::testing::Values(RouteCase{8, 2, true}, RouteCase{128, 8, true}, RouteCase{160, 6, false},
                                           RouteCase{512, 32, true}, RouteCase{4, 4, false}),
                         [](const auto& i) {
                           return fmt::format("e{}_k{}{}", i.param.e, i.param.k, i.param.norm ? "_norm" : "");
                         });

TEST(MoeCombine, MatchesReference) {
  const uint32_t k = 3, n = 200;
  Graph g(device());
  TensorId dn = add_input(g, {.name = "dn", .max_shape = {6 * k, n}, .dynamic_dims = 1});
  TensorId w = add_input(g, {.name = "w", .max_shape = {6 * k}, .dynamic_dims = 1});
  TensorId res = add_input(g, {.name = "res", .max_shape = {6, n}, .dynamic_dims = 1});
  TensorId out = ops::add_moe_combine(g, {.name = "out", .experts = dn, .weights = w, .residual = res, .n_used = k});
  mark_output(g, out);
  build(g);
  uint32_t step = 0;
  for (uint32_t m : {2u, 6u, 1u}) {
    SCOPED_TRACE(fmt::format("{} tokens", m));
    auto dv = random_floats(size_t(m) * k * n, 70 + step, -3.f, 3.f);
    auto wv = random_floats(size_t(m) * k, 80 + step, 0.f, 1.f);
    auto rv = random_floats(size_t(m) * n, 90 + step++, -3.f, 3.f);
    std::vector<ShapeInput> shapes = {{dn, {m * k, n}}, {w, {m * k}}, {res, {m, n}}};
    std::vector<StepInput> in = {{dn, dv.data(), dv.size() * 4}, {w, wv.data(), wv.size() * 4},
                                 {res, rv.data(), rv.size() * 4}};
    const std::vector<float> got = run_step(g, shapes, {}, in, out);
    const std::vector<float> want = ref::moe_combine(dv, wv, rv, m, k, n);
    EXPECT_TRUE(within(got, want, std::vector<float>(want.size(), 1e-5f)));
  }
}

TEST(MoeBuild, RefusesWhatItCannotRun) {
  Graph g(device());
  TensorId l = add_input(g, {.name = "l", .max_shape = {4, 8}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_moe_route(g, {.name = "a", .logits = l, .n_used = 9}), std::invalid_argument);
  EXPECT_THROW(ops::add_moe_route(g, {.name = "b", .logits = l, .n_used = 0}), std::invalid_argument);
  TensorId big = add_input(g, {.name = "big", .max_shape = {2, ops::kMoeMaxExperts + 1}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_moe_route(g, {.name = "c", .logits = big, .n_used = 2}), std::invalid_argument);
  TensorId dn = add_input(g, {.name = "dn", .max_shape = {8, 16}, .dynamic_dims = 1});
  TensorId w = add_input(g, {.name = "w", .max_shape = {8}, .dynamic_dims = 1});
  TensorId res = add_input(g, {.name = "res", .max_shape = {4, 16}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_moe_combine(g, {.name = "d", .experts = dn, .weights = w, .residual = res, .n_used = 3}),
               std::invalid_argument);
  EXPECT_NO_THROW(ops::add_moe_combine(g, {.name = "e", .experts = dn, .weights = w, .residual = res, .n_used = 2}));
}

}  // namespace
}  // namespace wgrt::test
