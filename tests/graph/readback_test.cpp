// GraphReadback: each execute snapshots its outputs at their live shape in one of two slots,
// so a step can be read after the next one was updated and submitted (pipelined decode).
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "support/device.h"
#include "support/graph_fixture.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::graph {
namespace {

using test::SmallGraph;

struct GraphReadback : ::testing::Test {
  Graph g{test::device()};
  SmallGraph s = test::add_small_graph(g);
  void SetUp() override { test::build_small_graph(g, s); }

  Snapshot submit(uint32_t rows, const std::vector<float>& x, const ExecuteOptions& o = {}) {
    ShapeInput shape{s.x, {rows, SmallGraph::kK}};
    update(g, {&shape, 1});
    write_tensor<float>(g, s.x, x);
    return execute(g, o);
  }
};

TEST_F(GraphReadback, SnapshotKeepsItsStepAcrossTheNextUpdateAndExecute) {
  auto x5 = test::random_floats(5 * SmallGraph::kK, 1);
  auto x1 = test::random_floats(1 * SmallGraph::kK, 2);
  Snapshot a = submit(5, x5);
  Snapshot b = submit(1, x1);  // a new live shape before `a` is read
  EXPECT_TRUE(test::all_close(read_output<float>(g, a, s.y), test::small_graph_reference(s, x5, 5), 1e-4f, 1e-4f));
  EXPECT_EQ(snapshot_bytes(g, a, s.y), 5u * SmallGraph::kOut * 4);
  EXPECT_TRUE(test::all_close(read_output<float>(g, b, s.y), test::small_graph_reference(s, x1, 1), 1e-4f, 1e-4f));
  // Reading twice gives the same values.
  EXPECT_TRUE(test::all_close(read_output<float>(g, b, s.y), test::small_graph_reference(s, x1, 1), 1e-4f, 1e-4f));
}

// The first read keeps the snapshot's mapping (later reads copy from it, a step's rows read one
// by one); refilling the slot two executes later releases it, so the slot's copy stays valid.
TEST_F(GraphReadback, ReadsInPartsThenWholeAndTheSlotsReuseAfterAKeptMapping) {
  auto x5 = test::random_floats(5 * SmallGraph::kK, 4);
  auto x2 = test::random_floats(2 * SmallGraph::kK, 5);
  const auto want5 = test::small_graph_reference(s, x5, 5);
  Snapshot a = submit(5, x5);
  std::vector<float> row0(SmallGraph::kOut);
  read_output(g, a, s.y, row0.data(), row0.size() * sizeof(float));
  EXPECT_TRUE(test::all_close(row0, std::vector<float>(want5.begin(), want5.begin() + SmallGraph::kOut), 1e-4f, 1e-4f));
  EXPECT_TRUE(test::all_close(read_output<float>(g, a, s.y), want5, 1e-4f, 1e-4f));
  std::vector<float> row4(SmallGraph::kOut);  // the last row, from its offset
  read_output(g, a, s.y, row4.data(), row4.size() * sizeof(float), 4 * SmallGraph::kOut * sizeof(float));
  EXPECT_TRUE(test::all_close(row4, std::vector<float>(want5.end() - SmallGraph::kOut, want5.end()), 1e-4f, 1e-4f));
  // Past the snapshot's bytes: refused by name, the mapping kept for the next read.
  EXPECT_THROW(read_output(g, a, s.y, row4.data(), row4.size() * sizeof(float), 5 * SmallGraph::kOut * sizeof(float) - 4),
               std::invalid_argument);
  EXPECT_TRUE(test::all_close(read_output<float>(g, a, s.y), want5, 1e-4f, 1e-4f));
  for (int step = 0; step < 3; ++step) {  // a's slot, kept mapped, is filled again by the second
    Snapshot b = submit(2, x2);
    EXPECT_TRUE(test::all_close(read_output<float>(g, b, s.y), test::small_graph_reference(s, x2, 2), 1e-4f, 1e-4f));
    EXPECT_TRUE(test::all_close(read_output<float>(g, b, s.y), test::small_graph_reference(s, x2, 2), 1e-4f, 1e-4f));
  }
  EXPECT_THROW(read_output<float>(g, a, s.y), std::invalid_argument);
}

TEST_F(GraphReadback, OverwrittenOrUnreadSnapshotsAreRefused) {
  auto x = test::random_floats(3 * SmallGraph::kK, 3);
  Snapshot a = submit(3, x);
  submit(3, x);
  submit(3, x);  // reuses a's slot
  EXPECT_THROW(read_output<float>(g, a, s.y), std::invalid_argument);
  Snapshot none = submit(3, x, {.read_none = true});
  EXPECT_THROW(read_output<float>(g, none, s.y), std::invalid_argument);
  EXPECT_THROW(execute(g, {.read = {&s.w1, 1}}), std::invalid_argument);  // not an output
}

}  // namespace
}  // namespace wgrt::graph
