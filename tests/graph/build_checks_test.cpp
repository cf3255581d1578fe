// The graph's own guards: always-on invariant checks (file:line, in release builds too),
// infer outputs that start invalid (a forgotten one is an error, never a stale shape), an
// atomic build (a failure, the first plan's included, leaves a graph that builds again once
// fixed), and read-after-write order on state tensors (the KV cache) checked at build.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu/handles.h"
#include "gpu/pipeline.h"
#include "support/throws.h"
#include "graph/check.h"
#include "graph/graph.h"
#include "ops/attention/attention.h"
#include "ops/common.h"
#include "ops/elementwise/elementwise.h"
#include "ops/kv_cache/kv_cache.h"
#include "support/device.h"
#include "support/graph_fixture.h"
#include "support/random.h"

namespace wgrt::graph {
namespace {

using ::testing::HasSubstr;
using test::SmallGraph;

using test::message_of;

TEST(GraphChecks, ABrokenInvariantThrowsWithFileAndLine) {
  std::string msg = message_of<InvariantError>([] { (void)Shape{1, 2, 3, 4, 5}; });
  EXPECT_THAT(msg, HasSubstr("shape.cpp:"));
  EXPECT_THAT(msg, HasSubstr("a shape of 5 dims (at most 4)"));
  EXPECT_NO_THROW((Shape{1, 2, 3, 4}));
}

// y = a + b as an elementwise node with the given outputs and infer.
void add_pair_node(Graph& g, const std::string& name, TensorId a, TensorId b, std::vector<TensorId> outs, InferFn infer,
                   std::vector<SymbolId> shape_symbols = {}) {
  KernelSpec k{gpu::make_key("elementwise", "add"),
               {Binding::of(0, a), Binding::of(1, b), Binding::of(2, outs[0]), Binding::params(3)}};
  add_node(g, Node{
      .name = name,
      .op = "pair",
      .inputs = {a, b},
      .outputs = std::move(outs),
      .shape_symbols = std::move(shape_symbols),
      .routes = single_route(RouteKey::of_dim(a, 0), 1, tensor_info(g, a).max_shape[0], {k}),
      .infer = std::move(infer),
      .plan =
          [](const PlanArgs& p, Plan& plan) {
            ops::ElementwiseParams params{};
            params.n = uint32_t(p.out[0].numel());
            params.b_n = uint32_t(p.in[1].numel());
            plan.params[0].set(params);
            plan.grids[0] = ops::grid_1d(ops::ceil_div(params.n, 256), 65535);
          },
  });
}

// Symbols live as u32 words of the symbol block (graph_symbols.wgsl): a graph holds at most
// kMaxSymbols, each within [0, 2^32), and the WGSL struct is exactly the block's size.
TEST(GraphSymbols, TheBlockHoldsEverySymbolAsAU32) {
  Graph g(test::device());
  for (size_t i = 0; i < kMaxSymbols; ++i) add_symbol(g, {.name = "s" + std::to_string(i), .lo = 0, .hi = 1});
  std::string msg = message_of<std::invalid_argument>([&] { add_symbol(g, {.name = "one_more", .lo = 0, .hi = 1}); });
  EXPECT_THAT(msg, ::testing::HasSubstr("'one_more'"));
  EXPECT_THAT(msg, ::testing::HasSubstr("at most 16 symbols"));

  Graph h(test::device());
  msg = message_of<std::invalid_argument>([&] { add_symbol(h, {.name = "neg", .lo = -1, .hi = 4}); });
  EXPECT_THAT(msg, ::testing::HasSubstr("'neg'"));
  EXPECT_THAT(msg, ::testing::HasSubstr("outside [0, 2^32)"));
  msg = message_of<std::invalid_argument>([&] { add_symbol(h, {.name = "big", .lo = 0, .hi = int64_t(1) << 32}); });
  EXPECT_THAT(msg, ::testing::HasSubstr("'big'"));

  const std::string wgsl(gpu::kernel_source("graph_symbols"));
  const std::string decl = "array<vec4<u32>, " + std::to_string(kSymbolBlockBytes / 16) + ">";
  EXPECT_NE(wgsl.find(decl), std::string::npos) << "graph_symbols.wgsl does not declare " << decl;
  EXPECT_EQ(kSymbolBlockBytes, kMaxSymbols * 4);
}

TEST(GraphInfer, AForgottenOutputIsAnErrorNamingNodeAndOutput) {
  Graph g(test::device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {8, 4}, .dynamic_dims = 0b01});
  SymbolId mode = add_symbol(g, {.name = "mode", .lo = 0, .hi = 1});
  TensorId y = add_tensor(g, "y", DType::F32, {8, 4});
  TensorId side = add_tensor(g, "side", DType::F32, {8, 4});
  // Sets `side` only while mode is 0: with outputs preset to their old shapes, mode 1 would
  // silently keep the shape of the last step.
  add_pair_node(g, "two_out", x, x, {y, side}, [mode](const InferArgs& a) {
    a.out[0] = a.in[0];
    if (a.sym[mode] == 0) a.out[1] = a.in[0];
  }, {mode});
  mark_output(g, y);
  mark_output(g, side);
  build(g);
  ASSERT_NO_THROW(update(g, std::vector<ShapeInput>{{x, {3, 4}}}));
  EXPECT_EQ(live_shape(g, side), (Shape{3, 4}));

  std::string msg = message_of<std::runtime_error>(
      [&] { update(g, std::vector<ShapeInput>{{x, {5, 4}}}, std::vector<SymbolInput>{{mode, 1}}); });
  EXPECT_THAT(msg, HasSubstr("node 'two_out'"));
  EXPECT_THAT(msg, HasSubstr("output 1 'side'"));
  EXPECT_EQ(live_shape(g, side), (Shape{3, 4}));  // the failed update changed nothing
  EXPECT_EQ(live_shape(g, x), (Shape{3, 4}));
}

TEST(GraphInfer, AnOutputForgottenAtTheFirstPlanFailsBuild) {
  Graph g(test::device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {8, 4}});
  TensorId y = add_tensor(g, "y", DType::F32, {8, 4});
  TensorId side = add_tensor(g, "side", DType::F32, {8, 4});
  add_pair_node(g, "forgets", x, x, {y, side}, [](const InferArgs& a) { a.out[0] = a.in[0]; });
  mark_output(g, side);
  std::string msg = message_of<std::runtime_error>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("node 'forgets'"));
  EXPECT_THAT(msg, HasSubstr("output 1 'side'"));
  EXPECT_FALSE(is_built(g));
}

// Rows of the small graph, run and compared with the CPU.
void expect_small_graph_runs(Graph& g, const SmallGraph& s, uint32_t rows, int64_t step) {
  update(g, std::vector<ShapeInput>{{s.x, {rows, SmallGraph::kK}}}, std::vector<SymbolInput>{{s.step, step}});
  auto x = test::random_floats(size_t(rows) * SmallGraph::kK, 40 + rows);
  write_tensor<float>(g, s.x, x);
  execute(g);
  auto y = read_output<float>(g, s.y);
  auto want = test::small_graph_reference(s, x, rows);
  ASSERT_EQ(y.size(), want.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << i;
}

TEST(GraphBuild, AFailedFirstPlanLeavesAGraphThatBuildsAgain) {
  {  // fill the pipeline cache, which outlives graphs
    Graph warm(test::device());
    SmallGraph s = test::add_small_graph(warm);
    test::build_small_graph(warm, s);
  }
  const gpu::ObjectCounts start = gpu::object_counts();
  Graph g(test::device());
  SmallGraph s = test::add_small_graph(g, /*throw_at=*/0);  // the first plan is at step's lower bound, 0
  std::string msg = message_of<std::runtime_error>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("planned failure"));
  EXPECT_FALSE(is_built(g));
  EXPECT_THROW((void)live_shape(g, s.x), std::logic_error);  // no live state either
  EXPECT_THROW(write_tensor<float>(g, s.x, std::vector<float>(4)), std::logic_error);
  EXPECT_THROW(update(g, std::vector<ShapeInput>{{s.x, {1, SmallGraph::kK}}}), std::logic_error);
  const gpu::ObjectCounts failed = gpu::object_counts();
  for (size_t k = 0; k < size_t(gpu::ObjectKind::Count); ++k)  // what the attempt made is released
    EXPECT_EQ(failed.alive[k], start.alive[k]) << gpu::object_kind_name(gpu::ObjectKind(k));

  // The fix: what made the probe's plan throw is gone.
  *s.throw_at = -1;
  test::build_small_graph(g, s);
  EXPECT_TRUE(is_built(g));
  expect_small_graph_runs(g, s, 5, 0);  // the step value whose plan failed
  expect_small_graph_runs(g, s, 1, 4);
}

// A node's kernels are fixed once added (the graph is sealed), so a failed compile cannot be
// fixed in place: the retry must fail the same way (not "already built", not a leak), and the
// same nodes with a kernel that compiles build and run.
TEST(GraphBuild, AFailedCompileReleasesItsBuffersAndFailsAgainTheSameWay) {
  {
    Graph warm(test::device());
    SmallGraph s = test::add_small_graph(warm);
    test::build_small_graph(warm, s);
  }
  const gpu::ObjectCounts start = gpu::object_counts();
  Graph g(test::device());
  SmallGraph s = test::add_small_graph(g, -1, gpu::make_key("elementwise", "add", {{"NO_SUCH_CONSTANT", 1.0}}));
  std::string msg = message_of<gpu::GpuError>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("node 'probe'"));
  EXPECT_FALSE(is_built(g));
  const gpu::ObjectCounts failed = gpu::object_counts();
  EXPECT_GT(failed.created_of(gpu::ObjectKind::Buffer), start.created_of(gpu::ObjectKind::Buffer));  // it got that far
  for (size_t k2 = 0; k2 < size_t(gpu::ObjectKind::Count); ++k2)
    EXPECT_EQ(failed.alive[k2], start.alive[k2]) << gpu::object_kind_name(gpu::ObjectKind(k2));

  EXPECT_EQ(message_of<gpu::GpuError>([&] { build(g); }), msg);
  const gpu::ObjectCounts again = gpu::object_counts();
  for (size_t k2 = 0; k2 < size_t(gpu::ObjectKind::Count); ++k2)
    EXPECT_EQ(again.alive[k2], start.alive[k2]) << gpu::object_kind_name(gpu::ObjectKind(k2));

  Graph fixed(test::device());
  SmallGraph fs = test::add_small_graph(fixed);
  test::build_small_graph(fixed, fs);
  expect_small_graph_runs(fixed, fs, 7, 2);
}

// A KV-cache layer: q, k, v inputs; the write and the attention in the given order.
struct KvLayer {
  TensorId q, k, v, k_cache, v_cache;
  SymbolId pos;
};
KvLayer add_kv_inputs(Graph& g, bool carried = false) {
  constexpr uint32_t n_kv = 2, n_ctx = 16, hd = 32, heads = 4;
  KvLayer l;
  l.q = add_input(g, {.name = "q", .max_shape = {4, heads * hd}, .dynamic_dims = 1});
  l.k = add_input(g, {.name = "k", .max_shape = {4, n_kv * hd}, .dynamic_dims = 1});
  l.v = add_input(g, {.name = "v", .max_shape = {4, n_kv * hd}, .dynamic_dims = 1});
  if (carried) {
    l.k_cache = add_weight(g, {.name = "k_cache", .shape = {n_kv, n_ctx, hd}, .role = TensorRole::State, .carried = true});
    l.v_cache = add_weight(g, {.name = "v_cache", .shape = {n_kv, n_ctx, hd}, .role = TensorRole::State, .carried = true});
  } else {
    l.k_cache = ops::add_kv_cache(g, "k_cache", DType::F32, n_kv, n_ctx, hd);
    l.v_cache = ops::add_kv_cache(g, "v_cache", DType::F32, n_kv, n_ctx, hd);
  }
  l.pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = n_ctx - 4});
  return l;
}
void add_write(Graph& g, const KvLayer& l) {
  ops::add_kv_write(g, {.name = "kv_write.0", .k = l.k, .v = l.v, .k_cache = l.k_cache, .v_cache = l.v_cache, .pos = l.pos});
}
void add_attend(Graph& g, const KvLayer& l) {
  TensorId out = ops::add_attention(g, {.name = "attn.0", .q = l.q, .k_cache = l.k_cache, .v_cache = l.v_cache,
                                        .pos = l.pos, .n_heads = 4});
  mark_output(g, out);
}

TEST(GraphStateOrder, AttentionBeforeTheKvWriteIsRefusedNamingBoth) {
  Graph g(test::device());
  KvLayer l = add_kv_inputs(g);
  add_attend(g, l);
  add_write(g, l);
  std::string msg = message_of<std::invalid_argument>([&] { build(g); });
  EXPECT_THAT(msg, HasSubstr("'attn.0'"));
  EXPECT_THAT(msg, HasSubstr("'kv_write.0'"));
  EXPECT_THAT(msg, HasSubstr("'k_cache'"));
  EXPECT_THAT(msg, HasSubstr("hint"));
  EXPECT_FALSE(is_built(g));
}

TEST(GraphStateOrder, TheWriteFirstBuilds) {
  Graph g(test::device());
  KvLayer l = add_kv_inputs(g);
  add_write(g, l);
  add_attend(g, l);
  EXPECT_NO_THROW(build(g));
}

TEST(GraphStateOrder, ACarriedStateMayBeReadBeforeItsWriter) {
  Graph g(test::device());
  KvLayer l = add_kv_inputs(g, /*carried=*/true);
  add_attend(g, l);
  add_write(g, l);
  EXPECT_NO_THROW(build(g));
  // Only State tensors can be carried.
  EXPECT_THROW(add_weight(g, {.name = "w", .shape = {4}, .carried = true}), std::logic_error);  // built already
  Graph h(test::device());
  EXPECT_THROW(add_weight(h, {.name = "w", .shape = {4}, .carried = true}), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::graph
