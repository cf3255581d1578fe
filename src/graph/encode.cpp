// Encoding the active dispatches: the one loop that execute() and the labs' timed passes share.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "graph/check.h"
#include "graph/graph.h"
#include "graph/state.h"
#include "support/knobs.h"

namespace wgrt::graph {
namespace {

// `nodes` checked, or every node when empty.
std::vector<size_t> node_indices(const GraphState& g, std::span<const NodeId> nodes, const char* what) {
  if (!g.planned) throw std::logic_error(fmt::format("{}: build the graph first", what));
  std::vector<size_t> out;
  if (nodes.empty())
    for (size_t n = 0; n < g.nodes.size(); ++n) out.push_back(n);
  for (NodeId n : nodes) {
    check_node_id(g, n, what);
    out.push_back(n.v);
  }
  return out;
}

}  // namespace

namespace {
const knobs::Text kSkipNodes{"WGRT_SKIP_NODES",
                             "PREFIX[:KERNEL],...: nodes (or one kernel of them) left out of every pass (to measure)",
                             knobs::Lab};
}  // namespace

std::vector<uint32_t> skipped_from_env(const GraphState& g) {
  const std::string s = kSkipNodes.get().value_or("");
  std::vector<uint32_t> masks;
  for (size_t at = 0; at < s.size();) {
    const size_t end = std::min(s.find(',', at), s.size());
    std::string item = s.substr(at, end - at);
    uint32_t bits = ~0u;  // every kernel of the node
    if (const size_t colon = item.find(':'); colon != std::string::npos) {
      const std::string k = item.substr(colon + 1);
      if (k.empty() || k.size() > 1 || k[0] < '0' || k[0] >= char('0' + kMaxDispatches))
        throw std::invalid_argument(fmt::format("WGRT_SKIP_NODES: '{}' (hint: PREFIX or PREFIX:KERNEL, KERNEL a node's "
                                                "kernel index 0..{}, items separated by commas)",
                                                item, kMaxDispatches - 1));
      bits = 1u << (k[0] - '0');
      item.resize(colon);
    }
    if (item.empty())
      throw std::invalid_argument(fmt::format("WGRT_SKIP_NODES='{}': an empty node prefix (hint: '*' for every node)", s));
    masks.resize(g.nodes.size(), 0);
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (item == "*" || g.nodes[n].name.starts_with(item)) masks[n] |= bits;
    at = end + 1;
  }
  return masks;
}

void set_skipped_kernels(Graph& graph, std::vector<uint32_t> masks) {
  GraphState& g = state(graph);
  if (!masks.empty() && masks.size() != g.nodes.size())
    throw std::invalid_argument(fmt::format("set_skipped_kernels: {} masks for {} nodes", masks.size(), g.nodes.size()));
  g.skipped = std::move(masks);
}

bool skipping_kernels(const Graph& graph) {
  const GraphState& g = state(graph);
  return std::any_of(g.skipped.begin(), g.skipped.end(), [](uint32_t m) { return m != 0; });
}

void encode_node(const GraphState& g, size_t n, WGPUComputePassEncoder pass, const std::vector<gpu::BindGroup>* groups) {
  const NodeState& ns = g.live.nodes[n];
  const auto& kernels = g.compiled[n][ns.route];
  WGRT_CHECK(!groups || groups->size() == kernels.size(), "node '{}': {} bind groups for {} kernels", g.nodes[n].name,
             groups->size(), kernels.size());
  for (size_t j = 0; j < kernels.size(); ++j) {
    const Grid& gr = ns.plan.grids[j];
    if (gr.x == 0) continue;  // an optional kernel this plan skips (check_plan allows no other empty grid)
    if (!groups && n < g.skipped.size() && (g.skipped[n] >> j & 1u)) continue;  // set_skipped_kernels
    wgpuComputePassEncoderSetPipeline(pass, kernels[j].pipeline->pipeline.get());
    wgpuComputePassEncoderSetBindGroup(pass, 0, groups ? (*groups)[j].get() : kernels[j].bind_group.get(), 0, nullptr);
    wgpuComputePassEncoderDispatchWorkgroups(pass, gr.x, gr.y, gr.z);
  }
}

void encode(const Graph& graph, WGPUComputePassEncoder pass, std::span<const NodeId> nodes) {
  const GraphState& g = state(graph);
  for (size_t n : node_indices(g, nodes, "encode")) encode_node(g, n, pass);
}

ReboundNodes rebind(Graph& graph, std::span<const NodeId> nodes, std::span<const BufferOverride> overrides) {
  const GraphState& g = state(graph);
  for (const BufferOverride& o : overrides) {
    check_tensor_id(g, o.tensor, "rebind");
    if (!o.buffer) throw std::invalid_argument(fmt::format("rebind: no buffer for '{}'", g.tensors[o.tensor.v].name));
  }
  ReboundNodes out;
  for (size_t n : node_indices(g, nodes, "rebind")) {
    const uint32_t r = g.live.nodes[n].route;
    auto& groups = out.groups.emplace_back();
    for (size_t j = 0; j < g.compiled[n][r].size(); ++j)
      groups.push_back(make_bind_group(g, n, r, j, *g.compiled[n][r][j].pipeline, overrides));
    out.nodes.push_back(NodeId{uint32_t(n)});
    out.routes.push_back(g.nodes[n].routes.routes[r].id);
  }
  return out;
}

void encode(const Graph& graph, WGPUComputePassEncoder pass, const ReboundNodes& rebound) {
  const GraphState& g = state(graph);
  for (size_t i = 0; i < rebound.nodes.size(); ++i) {
    const size_t n = rebound.nodes[i].v;
    check_node_id(g, rebound.nodes[i], "encode");
    const Route& active = g.nodes[n].routes.routes[g.live.nodes[n].route];
    if (active.id != rebound.routes[i]) {
      const Route* made_for = find_route(g.nodes[n].routes, rebound.routes[i]);
      throw std::logic_error(fmt::format(
          "encode: node '{}' was rebound for route '{}', but route '{}' is active now (hint: rebind after the update)",
          g.nodes[n].name, made_for ? made_for->name : "?", active.name));
    }
    encode_node(g, n, pass, &rebound.groups[i]);
  }
}

}  // namespace wgrt::graph
