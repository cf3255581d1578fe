// update(): staged propagation of live shapes and plans, then an atomic commit.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>

#include "gpu/device.h"
#include "graph/check.h"
#include "graph/graph.h"
#include "graph/state.h"

namespace wgrt::graph {
namespace {

void stage_shape(const GraphState& g, const ShapeInput& in, LiveState& st) {
  if (in.tensor.v >= g.tensors.size())
    throw std::invalid_argument(fmt::format("update: tensor id {} does not exist ({} tensors)",
                                            in.tensor.v, g.tensors.size()));
  const Tensor& t = g.tensors[in.tensor.v];
  if (t.role != TensorRole::Input)
    throw std::invalid_argument(fmt::format(
        "update: '{}' is not a graph input; only inputs take shapes from the caller", t.name));
  if (in.shape.rank != t.max_shape.rank)
    throw std::invalid_argument(fmt::format("update: input '{}' has rank {}, got shape {}", t.name,
                                            t.max_shape.rank, to_string(in.shape)));
  for (int i = 0; i < t.max_shape.rank; ++i) {
    bool dynamic = (t.dynamic_dims >> i) & 1;
    uint32_t v = in.shape[i], max = t.max_shape[i];
    if (!dynamic && v != max)
      throw std::invalid_argument(fmt::format(
          "update: input '{}' dim {} is fixed at {}, got {} (shape {})", t.name, i, max, v,
          to_string(in.shape)));
    if (v < 1 || v > max)
      throw std::invalid_argument(fmt::format(
          "update: input '{}' dim {} = {} is out of range [1, {}] (hint: the graph was built for "
          "at most {})", t.name, i, v, max, max));
  }
  st.shapes[in.tensor.v] = in.shape;
}

void stage_symbol(const GraphState& g, const SymbolInput& in, LiveState& st) {
  if (in.symbol.v >= g.symbols.size())
    throw std::invalid_argument(fmt::format("update: symbol id {} does not exist ({} symbols)",
                                            in.symbol.v, g.symbols.size()));
  const Symbol& s = g.symbols[in.symbol.v];
  if (in.value < s.lo || in.value > s.hi)
    throw std::invalid_argument(fmt::format("update: symbol '{}' = {} is out of range [{}, {}]",
                                            s.name, in.value, s.lo, s.hi));
  st.symbols[in.symbol.v] = in.value;
}

void check_output(const GraphState& g, const Node& node, TensorId id, const Shape& s) {
  const Tensor& t = g.tensors[id.v];
  bool ok = s.rank == t.max_shape.rank;
  for (int i = 0; ok && i < s.rank; ++i) ok = s[i] >= 1 && s[i] <= t.max_shape[i];
  if (t.role == TensorRole::State) ok = ok && s == t.max_shape;
  if (!ok)
    throw std::runtime_error(fmt::format(
        "node '{}' ({}): inferred shape {} for '{}' does not fit its {} shape {}", node.name,
        node.op, to_string(s), t.name, t.role == TensorRole::State ? "fixed" : "max",
        to_string(t.max_shape)));
}

int64_t key_value(const RouteKey& k, const LiveState& st) {
  return k.kind == RouteKey::Kind::Symbol ? st.symbols[k.symbol.v]
                                          : int64_t(st.shapes[k.tensor.v][k.dim]);
}

void check_plan(const GraphState& g, const Node& node, const Route& route, const Plan& plan) {
  const uint32_t max = g.dev->caps.limits.maxComputeWorkgroupsPerDimension;
  for (size_t j = 0; j < route.kernels.size(); ++j) {
    const Grid& gr = plan.grids[j];
    if (route.kernels[j].optional && gr == Grid{0, 0, 0}) continue;  // skipped this step
    for (uint32_t v : {gr.x, gr.y, gr.z})
      if (v == 0 || v > max)
        throw std::runtime_error(fmt::format(
            "node '{}' ({}) route '{}' kernel {}: grid ({}, {}, {}) is empty or past the device "
            "limit of {} workgroups per dimension", node.name, node.op, route.name, j, gr.x, gr.y,
            gr.z, max));
  }
}

}  // namespace

void propagate_and_commit(GraphState& g) {
  LiveState& st = g.staged;
  SymbolValues sym{st.symbols};
  std::array<Shape, kMaxNodeTensors> in{};
  std::array<Shape, kMaxNodeTensors> out{};
  int64_t plans = 0;

  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    for (size_t i = 0; i < node.inputs.size(); ++i) in[i] = st.shapes[node.inputs[i].v];
    // Outputs start invalid, so one infer forgets keeps no stale shape (graph.h says which
    // outputs start at a fixed shape instead).
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const Tensor& t = g.tensors[node.outputs[i].v];
      out[i] = t.role == TensorRole::State || !t.read ? t.max_shape : Shape{};
    }
    std::span<const Shape> in_view(in.data(), node.inputs.size());
    std::span<Shape> out_view(out.data(), node.outputs.size());

    node.infer(InferArgs{in_view, out_view, sym});
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (out[i].rank == 0)
        throw std::runtime_error(fmt::format(
            "node '{}' ({}): infer did not set output {} '{}' (hint: its infer must give every output a shape)",
            node.name, node.op, i, g.tensors[node.outputs[i].v].name));
      check_output(g, node, node.outputs[i], out[i]);
      st.shapes[node.outputs[i].v] = out[i];
    }

    NodeState& ns = st.nodes[n];
    const Route& route = select_route(node.routes, key_value(node.routes.key, st));
    ns.route = uint32_t(&route - node.routes.routes.data());
    WGRT_CHECK(ns.route < g.compiled[n].size(), "node '{}': route {} of {}", node.name, ns.route, g.compiled[n].size());
    ns.plan = Plan{};
    node.plan(PlanArgs{in_view, out_view, sym, route.id, &g.dev->caps, &node}, ns.plan);
    ++plans;
    check_plan(g, node, route, ns.plan);
  }

  // Commit: nothing below throws.
  const bool first = !g.planned;
  if (g.symbol_block && (first || st.symbols != g.live.symbols)) {
    std::array<uint32_t, kMaxSymbols> values{};
    for (size_t i = 0; i < st.symbols.size(); ++i) values[i] = uint32_t(st.symbols[i]);  // [0, 2^32): add_symbol
    wgpuQueueWriteBuffer(g.dev->queue.get(), g.symbol_block.get(), 0, values.data(), kSymbolBlockBytes);
    ++g.stats.uniform_uploads;
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!g.uniforms[n]) continue;
    const Plan& next = st.nodes[n].plan;
    const Plan& prev = g.live.nodes[n].plan;
    size_t slots = 0;
    for (const Route& r : g.nodes[n].routes.routes) slots = std::max(slots, r.kernels.size());
    for (size_t j = 0; j < slots; ++j) {
      if (!first && next.params[j] == prev.params[j]) continue;
      wgpuQueueWriteBuffer(g.dev->queue.get(), g.uniforms[n].get(), uint64_t(g.uniform_stride) * j,
                           next.params[j].bytes.data(), kParamBytes);
      ++g.stats.uniform_uploads;
    }
  }
  std::swap(g.live, g.staged);
  g.planned = true;
  g.stats.plans += plans;
}

void update(Graph& graph, std::span<const ShapeInput> shapes, std::span<const SymbolInput> symbols) {
  GraphState& g = state(graph);
  if (!g.built) throw std::logic_error("update: build the graph first");
  const auto t0 = std::chrono::steady_clock::now();
  struct Timed {  // counts the time on every exit, the throwing ones included
    GraphState& g;
    std::chrono::steady_clock::time_point t0;
    ~Timed() {
      g.stats.update_ns +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    }
  } timed{g, t0};
  LiveState& st = g.staged;
  st.shapes = g.live.shapes;  // same sizes: copies without allocating
  st.symbols = g.live.symbols;
  st.nodes = g.live.nodes;
  for (const ShapeInput& s : shapes) stage_shape(g, s, st);
  for (const SymbolInput& s : symbols) stage_symbol(g, s, st);
  if (st.shapes == g.live.shapes && st.symbols == g.live.symbols) return;  // nothing changed
  propagate_and_commit(g);
  ++g.stats.updates;
}

}  // namespace wgrt::graph
