// A small multi-node graph used by the graph-engine tests:
//   h  = linear(x, w1, b1)       routes on x rows: gemv [1,1], tiled [2,max]
//   h2 = probe(h, r, step)       elementwise add whose plan reads symbol `step` (and can be
//                                told to throw for one value, to test atomic updates)
//   y  = linear(h2, w2)
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/graph.h"

namespace wgrt::test {

struct SmallGraph {
  static constexpr uint32_t kMaxRows = 64, kK = 37, kH = 19, kOut = 23;
  graph::TensorId x, w1, b1, r, w2, h, h2, y;
  graph::SymbolId step;
  graph::NodeId n_lin1, n_probe, n_lin2;
  std::vector<float> w1_data, b1_data, r_data, w2_data;
  std::shared_ptr<int64_t> throw_at;  // read by the probe's plan at every step
};

// Adds the nodes to `g` (not built). The probe's plan throws std::runtime_error when
// `step` equals `*throw_at`; the probe runs `probe_kernel` (default: elementwise add).
SmallGraph add_small_graph(graph::Graph& g, int64_t throw_at = -1,
                           const gpu::PipelineKey& probe_kernel = gpu::make_key("elementwise", "add"));
// Builds `g` and uploads the weights.
void build_small_graph(graph::Graph& g, SmallGraph& s);
// The CPU result for `rows` rows of x and the current weights.
std::vector<float> small_graph_reference(const SmallGraph& s, const std::vector<float>& x, uint32_t rows);

}  // namespace wgrt::test
