// GraphTransitions: one graph through 200 random prefill/decode-like updates, every step
// checked against the CPU reference.
#include <gtest/gtest.h>

#include <random>

#include "graph/graph.h"
#include "ops/linear/linear.h"
#include "support/device.h"
#include "support/graph_fixture.h"
#include "support/random.h"

namespace wgrt::graph {
namespace {

using test::SmallGraph;

TEST(GraphTransitions, TwoHundredRandomUpdates) {
  Graph g(test::device());
  SmallGraph s = test::add_small_graph(g);
  test::build_small_graph(g, s);

  std::mt19937 rng(1234);
  uint32_t rows = 1;
  int64_t step = 0;
  int gemv_steps = 0, tiled_steps = 0;
  for (int i = 0; i < 200; ++i) {
    switch (rng() % 4) {
      case 0:  // prefill-like: grow or shrink to any size
        rows = 2 + rng() % (SmallGraph::kMaxRows - 1);
        break;
      case 1:  // repeat the previous shape
        break;
      default:  // decode-like
        rows = 1;
        break;
    }
    step = (step + 1) % 101;
    ShapeInput shape{s.x, {rows, SmallGraph::kK}};
    SymbolInput sym{s.step, step};
    update(g, {&shape, 1}, {&sym, 1});
    ASSERT_EQ(live_shape(g, s.y), (Shape{rows, SmallGraph::kOut}));
    if (active_route(g, s.n_lin1) == ops::kLinearGemv) ++gemv_steps;
    if (active_route(g, s.n_lin1) == ops::kLinearTiled) ++tiled_steps;

    auto x = test::random_floats(size_t(rows) * SmallGraph::kK, 100 + uint32_t(i), -2.f, 2.f);
    write_tensor<float>(g, s.x, x);
    execute(g);
    auto y = read_output<float>(g, s.y);
    ASSERT_EQ(y.size(), size_t(rows) * SmallGraph::kOut);
    ASSERT_LT(test::max_rel_error(y, test::small_graph_reference(s, x, rows)), 1e-4f)
        << "step " << i << " rows " << rows;
  }
  EXPECT_GT(gemv_steps, 20) << "GEMV route barely exercised";
  EXPECT_GT(tiled_steps, 20) << "tiled route barely exercised";
}

}  // namespace
}  // namespace wgrt::graph
