// GraphEncode: the public encode path the labs time with. encode() into a caller's pass runs
// what execute runs (checked against the CPU), a node subset runs only those nodes, and
// rebind() sends chosen tensors to other buffers, refusing to encode once the route changed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/buffer.h"
#include "gpu/profiler.h"
#include "graph/graph.h"
#include "reference/reference.h"
#include "support/device.h"
#include "support/graph_fixture.h"
#include "support/random.h"
#include "support/throws.h"

namespace wgrt::graph {
namespace {

using ::testing::HasSubstr;
using test::SmallGraph;

struct GraphEncode : ::testing::Test {
  Graph g{test::device()};
  SmallGraph s = test::add_small_graph(g);
  void SetUp() override { test::build_small_graph(g, s); }

  std::vector<float> set_rows(uint32_t rows, uint32_t seed) {
    ShapeInput shape{s.x, {rows, SmallGraph::kK}};
    update(g, {&shape, 1});
    auto x = test::random_floats(size_t(rows) * SmallGraph::kK, seed);
    write_tensor<float>(g, s.x, x);
    return x;
  }
  // One pass of the caller's, filled by `fill`, submitted.
  template <class Fill>
  void run_pass(const Fill& fill) {
    gpu::Device& dev = device(g);
    auto enc = gpu::CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
    {
      gpu::ComputePass pass = gpu::begin_compute_pass(enc.get(), nullptr, "test pass");
      fill(pass.get());
      wgpuComputePassEncoderEnd(pass.get());
    }
    auto cmd = gpu::CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
    WGPUCommandBuffer raw = cmd.get();
    wgpuQueueSubmit(dev.queue.get(), 1, &raw);
  }
  std::vector<float> read(WGPUBuffer b, uint32_t rows, uint32_t cols) {
    return gpu::read_buffer<float>(device(g), b, size_t(rows) * cols);
  }
};

TEST_F(GraphEncode, EveryNodeIntoACallersPassComputesTheGraph) {
  for (uint32_t rows : {6u, 1u}) {  // tiled, then gemv
    auto x = set_rows(rows, 10 + rows);
    run_pass([&](WGPUComputePassEncoder pass) { encode(g, pass); });
    auto y = read(tensor_buffer(g, s.y), rows, SmallGraph::kOut);
    EXPECT_LT(test::max_rel_error(y, test::small_graph_reference(s, x, rows)), 1e-5f) << rows << " rows";
  }
}

TEST_F(GraphEncode, ANodeSubsetRunsThoseNodesOnly) {
  auto x = set_rows(3, 21);
  const std::vector<float> y_before = read(tensor_buffer(g, s.y), 3, SmallGraph::kOut);
  const NodeId first[] = {s.n_lin1};
  run_pass([&](WGPUComputePassEncoder pass) { encode(g, pass, first); });
  auto h = read(tensor_buffer(g, s.h), 3, SmallGraph::kH);
  EXPECT_LT(test::max_rel_error(h, ref::linear(x, s.w1_data, s.b1_data, 3, SmallGraph::kH, SmallGraph::kK)), 1e-5f);
  EXPECT_EQ(read(tensor_buffer(g, s.y), 3, SmallGraph::kOut), y_before);  // 'y' did not run
  EXPECT_THROW(encode(g, nullptr, std::vector<NodeId>{NodeId{99}}), std::invalid_argument);
}

TEST_F(GraphEncode, ReboundTensorsGoToTheirOwnBuffers) {
  set_rows(4, 31);
  run_pass([&](WGPUComputePassEncoder pass) { encode(g, pass); });
  const std::vector<float> y_graph = read(tensor_buffer(g, s.y), 4, SmallGraph::kOut);

  auto x2 = set_rows(4, 32);  // new values, same routes
  gpu::Device& dev = device(g);
  gpu::Buffer h2 = gpu::create_buffer(dev, tensor_info(g, s.h2).bytes, gpu::kStorageUsage, "fresh h2");
  gpu::Buffer y = gpu::create_buffer(dev, tensor_info(g, s.y).bytes, gpu::kStorageUsage, "fresh y");
  const BufferOverride overrides[] = {{s.h2, h2.get()}, {s.y, y.get()}};
  const ReboundNodes rebound = rebind(g, {}, overrides);
  run_pass([&](WGPUComputePassEncoder pass) { encode(g, pass, rebound); });
  EXPECT_LT(test::max_rel_error(read(y.get(), 4, SmallGraph::kOut), test::small_graph_reference(s, x2, 4)), 1e-5f);
  EXPECT_EQ(read(tensor_buffer(g, s.y), 4, SmallGraph::kOut), y_graph);  // the graph's own 'y' untouched

  set_rows(1, 33);  // 'h' switches from tiled to gemv: the bind groups were made for tiled
  std::string msg = test::message_of<std::logic_error>([&] { encode(g, nullptr, rebound); });
  EXPECT_THAT(msg, HasSubstr("node 'h'"));
  EXPECT_THAT(msg, HasSubstr("'tiled'"));
  EXPECT_THAT(msg, HasSubstr("'gemv'"));
}

TEST(GraphEncodeUnbuilt, EncodeAndRebindNeedABuiltGraph) {
  Graph g(test::device());
  SmallGraph s = test::add_small_graph(g);
  EXPECT_THROW(encode(g, nullptr), std::logic_error);
  EXPECT_THROW(rebind(g, {}, {}), std::logic_error);
  EXPECT_THROW((void)live_shape(g, s.y), std::logic_error);
}

}  // namespace
}  // namespace wgrt::graph
