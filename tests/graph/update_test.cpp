// GraphUpdate: staged propagation commits all or nothing.
#include <gtest/gtest.h>

#include "gpu/buffer.h"
#include "graph/graph.h"
#include "support/device.h"
#include "support/graph_fixture.h"
#include "ops/linear/linear.h"
#include "support/random.h"

namespace wgrt::graph {
namespace {

using test::SmallGraph;

// Everything update() may change, including the uniform bytes as the GPU holds them.
struct Snapshot {
  std::vector<Shape> shapes;
  std::vector<int64_t> symbols;
  std::vector<RouteId> routes;
  std::vector<Plan> plans;
  std::vector<std::vector<uint8_t>> uniform_bytes;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(Graph& g) {
  Snapshot s;
  for (uint32_t t = 0; t < tensor_count(g); ++t) s.shapes.push_back(live_shape(g, TensorId{t}));
  for (uint32_t v = 0; v < symbol_count(g); ++v) s.symbols.push_back(symbol_value(g, SymbolId{v}));
  for (uint32_t n = 0; n < node_count(g); ++n) {
    s.routes.push_back(active_route(g, NodeId{n}));
    s.plans.push_back(active_plan(g, NodeId{n}));
    s.uniform_bytes.push_back(gpu::read_buffer<uint8_t>(
        device(g), uniform_buffer(g, NodeId{n}), uniform_stride(g) * kMaxDispatches));
  }
  return s;
}

struct GraphUpdate : ::testing::Test {
  Graph g{test::device()};
  SmallGraph s = test::add_small_graph(g, /*throw_at=*/13);
  void SetUp() override { test::build_small_graph(g, s); }

  void set_rows(uint32_t rows, int64_t step) {
    ShapeInput shape{s.x, {rows, SmallGraph::kK}};
    SymbolInput sym{s.step, step};
    update(g, {&shape, 1}, {&sym, 1});
  }
  std::vector<float> run(const std::vector<float>& x) {
    write_tensor<float>(g, s.x, x);
    execute(g);
    return read_output<float>(g, s.y);
  }
};

TEST_F(GraphUpdate, ThrowingPlanLeavesGraphUnchangedAndRetrySucceeds) {
  auto x = test::random_floats(5 * SmallGraph::kK, 7);
  set_rows(5, 1);
  auto y5 = run(x);
  EXPECT_LT(test::max_rel_error(y5, test::small_graph_reference(s, x, 5)), 1e-5f);
  EXPECT_EQ(active_route(g, s.n_lin1), ops::kLinearTiled);

  Snapshot before = snapshot(g);
  GraphStats stats_before = stats(g);
  // Node 'h' (first) plans fine for 1 row and would switch to GEMV; 'probe' then throws.
  EXPECT_THROW(set_rows(1, 13), std::runtime_error);
  EXPECT_TRUE(snapshot(g) == before) << "a failed update changed the graph";
  EXPECT_EQ(stats(g).uniform_uploads, stats_before.uniform_uploads);
  EXPECT_EQ(run(x), y5) << "the graph no longer computes the committed 5-row step";

  // The same call with a valid value goes through.
  set_rows(1, 14);
  EXPECT_EQ(live_shape(g, s.y), (Shape{1, SmallGraph::kOut}));
  EXPECT_EQ(active_route(g, s.n_lin1), ops::kLinearGemv);
  EXPECT_EQ(symbol_value(g, s.step), 14);
  auto x1 = test::random_floats(SmallGraph::kK, 8);
  EXPECT_LT(test::max_rel_error(run(x1), test::small_graph_reference(s, x1, 1)), 1e-5f);
}

TEST_F(GraphUpdate, InvalidInputsRejectedWithoutChange) {
  set_rows(9, 2);
  Snapshot before = snapshot(g);
  auto expect_rejected = [&](std::span<const ShapeInput> shapes, std::span<const SymbolInput> syms,
                             const char* needle) {
    try {
      update(g, shapes, syms);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_TRUE(snapshot(g) == before) << needle;
  };
  ShapeInput ok_shape{s.x, {3, SmallGraph::kK}};
  ShapeInput unknown_tensor{TensorId{999}, {3, SmallGraph::kK}};
  ShapeInput not_input{s.h, {3, SmallGraph::kH}};
  ShapeInput too_big{s.x, {SmallGraph::kMaxRows + 1, SmallGraph::kK}};
  ShapeInput zero_rows{s.x, {0, SmallGraph::kK}};
  ShapeInput fixed_dim{s.x, {3, SmallGraph::kK - 1}};
  ShapeInput wrong_rank{s.x, {3}};
  SymbolInput unknown_symbol{SymbolId{42}, 1};
  SymbolInput out_of_range{s.step, 101};
  SymbolInput negative{s.step, -1};
  expect_rejected({&unknown_tensor, 1}, {}, "tensor id 999");
  expect_rejected({&not_input, 1}, {}, "not a graph input");
  expect_rejected({&too_big, 1}, {}, "out of range [1, 64]");
  expect_rejected({&zero_rows, 1}, {}, "out of range");
  expect_rejected({&fixed_dim, 1}, {}, "fixed at 37");
  expect_rejected({&wrong_rank, 1}, {}, "rank");
  // A valid shape next to a bad symbol: neither lands.
  expect_rejected({&ok_shape, 1}, {&unknown_symbol, 1}, "symbol id 42");
  expect_rejected({&ok_shape, 1}, {&out_of_range, 1}, "'step' = 101");
  expect_rejected({}, {&negative, 1}, "out of range [0, 100]");
}

TEST_F(GraphUpdate, UnchangedInputsUploadNothing) {
  set_rows(4, 3);
  GraphStats before = stats(g);
  for (int i = 0; i < 5; ++i) set_rows(4, 3);
  update(g, {}, {});
  EXPECT_EQ(stats(g).uniform_uploads, before.uniform_uploads);
  EXPECT_EQ(stats(g).plans, before.plans);
  EXPECT_EQ(stats(g).updates, before.updates);
  // A change of the symbol alone re-plans, but uploads only the block that changed (probe's).
  set_rows(4, 4);
  EXPECT_EQ(stats(g).uniform_uploads, before.uniform_uploads + 1);
}

TEST(GraphUpdateStatic, GraphWithoutDynamicInputsPlansOnce) {
  Graph g(test::device());
  TensorId a = add_input(g, {.name = "a", .max_shape = {3, 5}});
  TensorId w = add_weight(g, {.name = "w", .shape = {4, 5}});
  TensorId y = ops::add_linear(g, {.name = "y", .x = a, .w = w});
  mark_output(g, y);
  build(g);
  EXPECT_EQ(stats(g).plans, 1);
  ShapeInput same{a, {3, 5}};
  for (int i = 0; i < 3; ++i) {
    update(g, {&same, 1});
    execute(g);
  }
  EXPECT_EQ(stats(g).plans, 1);
  ShapeInput other{a, {2, 5}};
  EXPECT_THROW(update(g, {&other, 1}), std::invalid_argument);  // its dims are fixed
}

}  // namespace
}  // namespace wgrt::graph
