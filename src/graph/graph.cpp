// The sealed Graph and the functions that read it.
#include "graph/graph.h"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

#include "graph/check.h"
#include "graph/state.h"

namespace wgrt::graph {

Graph::Graph(gpu::Device& device) : state_(std::make_unique<GraphState>(device)) {}
Graph::~Graph() = default;

GraphState& state(Graph& g) { return *g.state_; }
const GraphState& state(const Graph& g) { return *g.state_; }

namespace {

const GraphState& built_state(const Graph& graph, const char* what) {
  const GraphState& g = state(graph);
  if (!g.planned) throw std::logic_error(fmt::format("{}: build the graph first", what));
  return g;
}

}  // namespace

gpu::Device& device(Graph& g) { return *state(g).dev; }
const gpu::DeviceCaps& device_caps(const Graph& g) { return state(g).dev->caps; }
bool is_built(const Graph& g) { return state(g).built; }
uint32_t tensor_count(const Graph& g) { return uint32_t(state(g).tensors.size()); }
uint32_t symbol_count(const Graph& g) { return uint32_t(state(g).symbols.size()); }
uint32_t node_count(const Graph& g) { return uint32_t(state(g).nodes.size()); }

const Tensor& tensor_info(const Graph& graph, TensorId t) {
  const GraphState& g = state(graph);
  check_tensor_id(g, t, "tensor_info");
  return g.tensors[t.v];
}

const Symbol& symbol_info(const Graph& graph, SymbolId s) {
  const GraphState& g = state(graph);
  if (s.v >= g.symbols.size())
    throw std::invalid_argument(
        fmt::format("symbol_info: symbol id {} does not exist ({} symbols)", s.v, g.symbols.size()));
  return g.symbols[s.v];
}

const Node& node_info(const Graph& graph, NodeId n) {
  const GraphState& g = state(graph);
  check_node_id(g, n, "node_info");
  return g.nodes[n.v];
}

std::span<const TensorId> graph_outputs(const Graph& g) { return state(g).outputs; }
const GraphStats& stats(const Graph& g) { return state(g).stats; }
const MemoryPlan& memory_plan(const Graph& g) { return state(g).memory; }
Snapshot last_snapshot(const Graph& g) { return state(g).last; }

const Shape& live_shape(const Graph& graph, TensorId t) {
  const GraphState& g = built_state(graph, "live_shape");
  check_tensor_id(g, t, "live_shape");
  return g.live.shapes[t.v];
}

int64_t symbol_value(const Graph& graph, SymbolId s) {
  const GraphState& g = built_state(graph, "symbol_value");
  (void)symbol_info(graph, s);
  return g.live.symbols[s.v];
}

const Route& active_route_info(const Graph& graph, NodeId n) {
  const GraphState& g = built_state(graph, "active_route");
  check_node_id(g, n, "active_route");
  return g.nodes[n.v].routes.routes[g.live.nodes[n.v].route];
}

RouteId active_route(const Graph& g, NodeId n) { return active_route_info(g, n).id; }

std::string describe_routes(const Node& node) {
  std::string s;
  for (const Route& r : node.routes.routes) s += fmt::format("{}{} = {}", s.empty() ? "" : ", ", r.name, r.id.v);
  return s;
}

const Route& route_info(const Graph& graph, NodeId n, RouteId id) {
  const Node& node = node_info(graph, n);
  if (const Route* r = find_route(node.routes, id)) return *r;
  throw std::invalid_argument(fmt::format("node '{}' ({}) has no route of id {} (its routes: {})", node.name, node.op,
                                          id.v, describe_routes(node)));
}

bool PlanArgs::route_is(RouteId id) const {
  WGRT_CHECK(node != nullptr, "PlanArgs without its node");
  if (find_route(node->routes, id) == nullptr)
    throw std::logic_error(fmt::format("node '{}' ({}): its plan names route id {}, which none of its routes has "
                                       "(its routes: {}; hint: a plan names only the routes its op declared for the node)",
                                       node->name, node->op, id.v, describe_routes(*node)));
  return route == id;
}

const Plan& active_plan(const Graph& graph, NodeId n) {
  const GraphState& g = built_state(graph, "active_plan");
  check_node_id(g, n, "active_plan");
  return g.live.nodes[n.v].plan;
}

std::string pass_label(const Graph& graph, NodeId n) {
  const Node& node = node_info(graph, n);
  return fmt::format("{} [{}:{}]", node.name, node.op, active_route_info(graph, n).name);
}

WGPUBuffer tensor_buffer(const Graph& graph, TensorId t) {
  const GraphState& g = built_state(graph, "tensor_buffer");
  check_tensor_id(g, t, "tensor_buffer");
  return g.buffers[g.memory.buffer_of[t.v]].get();
}

WGPUBuffer uniform_buffer(const Graph& graph, NodeId n) {
  const GraphState& g = built_state(graph, "uniform_buffer");
  check_node_id(g, n, "uniform_buffer");
  return g.uniforms[n.v].get();
}

uint32_t uniform_stride(const Graph& g) { return built_state(g, "uniform_stride").uniform_stride; }

namespace {
uint32_t node_dispatches(const GraphState& g, size_t i) {
  const NodeState& ns = g.live.nodes[i];
  uint32_t n = 0;
  for (size_t j = 0; j < g.compiled[i][ns.route].size(); ++j) n += ns.plan.grids[j].x != 0 ? 1 : 0;
  return n;
}
}  // namespace

uint32_t active_dispatches(const Graph& graph) {
  const GraphState& g = built_state(graph, "active_dispatches");
  uint32_t n = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) n += node_dispatches(g, i);
  return n;
}

uint32_t active_dispatches(const Graph& graph, NodeId id) {
  const GraphState& g = built_state(graph, "active_dispatches");
  check_node_id(g, id, "active_dispatches");
  return node_dispatches(g, id.v);
}

NodeCost node_cost(const Graph& graph, NodeId id) {
  const GraphState& g = built_state(graph, "node_cost");
  check_node_id(g, id, "node_cost");
  const Node& node = g.nodes[id.v];
  std::array<Shape, kMaxNodeTensors> in{}, out{};
  for (size_t i = 0; i < node.inputs.size(); ++i) in[i] = g.live.shapes[node.inputs[i].v];
  for (size_t i = 0; i < node.outputs.size(); ++i) out[i] = g.live.shapes[node.outputs[i].v];
  const PlanArgs a{{in.data(), node.inputs.size()}, {out.data(), node.outputs.size()}, SymbolValues{g.live.symbols},
                   node.routes.routes[g.live.nodes[id.v].route].id, &g.dev->caps, &node};
  if (node.cost) return node.cost(a);
  NodeCost c;
  for (TensorId t : node.inputs) c.bytes += dtype_bytes(g.tensors[t.v].dtype, g.live.shapes[t.v]);
  for (TensorId t : node.outputs) c.bytes += dtype_bytes(g.tensors[t.v].dtype, g.live.shapes[t.v]);
  return c;
}

}  // namespace wgrt::graph
