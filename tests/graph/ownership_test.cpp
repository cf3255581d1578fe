// GraphOwnership: nothing is created per step after warm-up, everything is released with the
// graph.
#include <gtest/gtest.h>

#include "gpu/handles.h"
#include "graph/graph.h"
#include "support/device.h"
#include "support/graph_fixture.h"
#include "support/random.h"

namespace wgrt::graph {
namespace {

using test::SmallGraph;

void step(Graph& g, const SmallGraph& s, uint32_t rows, int64_t sym_value) {
  ShapeInput shape{s.x, {rows, SmallGraph::kK}};
  SymbolInput sym{s.step, sym_value};
  update(g, {&shape, 1}, {&sym, 1});
  auto x = test::random_floats(size_t(rows) * SmallGraph::kK, rows);
  write_tensor<float>(g, s.x, x);
  execute(g);
  (void)read_output<float>(g, s.y);
}

TEST(GraphOwnership, NoObjectsCreatedPerStepAndAllReleased) {
  {  // First graph fills the device's pipeline cache, which outlives graphs by design.
    Graph warm(test::device());
    SmallGraph s = test::add_small_graph(warm);
    test::build_small_graph(warm, s);
  }
  const gpu::ObjectCounts start = gpu::object_counts();
  {
    Graph g(test::device());
    SmallGraph s = test::add_small_graph(g);
    test::build_small_graph(g, s);
    step(g, s, 7, 1);  // warm-up
    step(g, s, 1, 2);
    const gpu::ObjectCounts warm = gpu::object_counts();
    EXPECT_GT(warm.alive_of(gpu::ObjectKind::Buffer), start.alive_of(gpu::ObjectKind::Buffer));
    uint32_t sizes[] = {1, 1, 64, 1, 33, 2, 1, 64, 64, 1};
    for (int i = 0; i < 10; ++i) step(g, s, sizes[i], 3 + i);
    const gpu::ObjectCounts after = gpu::object_counts();
    EXPECT_EQ(after.created_persistent(), warm.created_persistent())
        << "buffers, bind groups or pipelines were created during steps";
    for (auto k : {gpu::ObjectKind::CommandEncoder, gpu::ObjectKind::ComputePassEncoder,
                   gpu::ObjectKind::CommandBuffer})
      EXPECT_EQ(after.alive_of(k), start.alive_of(k)) << gpu::object_kind_name(k);
  }
  const gpu::ObjectCounts end = gpu::object_counts();
  for (size_t k = 0; k < size_t(gpu::ObjectKind::Count); ++k)
    EXPECT_EQ(end.alive[k], start.alive[k]) << gpu::object_kind_name(gpu::ObjectKind(k));
}

}  // namespace
}  // namespace wgrt::graph
